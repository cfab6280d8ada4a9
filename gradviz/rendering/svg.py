"""SVG from ``dot``, made safe to inline in a page (report.html, its per-rank section)."""

import re

_PROLOG = re.compile(r"<\?xml.*?\?>|<!DOCTYPE.*?>|<!--.*?-->", re.S)
_SCRIPT = re.compile(r"<\s*/?\s*script", re.I)


def inline_svg(svg):
    """An SVG document from ``dot`` as an element to inline: no XML prolog, doctype, comments or scripts."""
    svg = _PROLOG.sub("", svg).strip()
    if _SCRIPT.search(svg):
        raise ValueError("refusing to inline an SVG that contains a script element")
    return svg
