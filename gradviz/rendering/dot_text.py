"""SVG layouts by a ``dot`` that measures text with Graphviz's own font tables instead of Pango.

A ``dot`` started with every plugin loads Pango, Cairo and fontconfig to measure each label: about 11 ms of CPU
per start before it reads the graph, and more per label, where the layout of a 20-node picture takes 1-5 ms.
Graphviz without a text-layout plugin measures text from its built-in Arial metrics, which Helvetica shares (and
Liberation Sans, what fontconfig gives for "Helvetica" here, and Arial, what browsers show for it elsewhere): a
picture viewed in a browser is measured as the browser draws it, not as the fonts of the machine that laid it out.
SVG only: a PNG or PDF is drawn by Cairo, so its layout (``-Tdot``) keeps Pango's measures.

The built-in tables have no bold face, so bold text would be measured as regular, about 7 % narrower than it is
drawn: ``widen_bold`` gives every bold cell of an HTML-like label its own minimum width, from per-character
widths of a bold sans serif (rounded up: most text gets a little more room than it needs).

``environment()`` is the environment to start such a ``dot`` in: ``GVBINDIR`` pointing at a folder whose plugin
list is Graphviz's own with only the core renderers and the dot layout kept (library paths made absolute). When
that cannot be made (no plugin list beside ``dot``, a user's own ``GVBINDIR``), it is None and ``dot`` runs as
installed; so it does for the rest of the process once a layout failed for want of a plugin (``failed``).
"""

import atexit
import functools
import glob
import html
import math
import os
import re
import shutil
import tempfile

from .dot_program import dot_program

CONFIG_NAMES = ("config8", "config6a", "config6")  # the plugin list's name, by Graphviz version
_KEPT = re.compile(r"gvplugin_(core|dot_layout)\b")  # SVG output and the dot layout: all an SVG layout needs

# advance widths of a bold sans serif (Helvetica's metrics), in ems, by character class; rounded up
_NARROW = dict.fromkeys("ijl|!.,:;'` ", 0.29)
_SMALL = dict.fromkeys("ftrI()[]{}-/\\\"*", 0.4)
_WIDE = {"m": 0.89, "M": 0.84, "w": 0.78, "W": 0.95, "@": 0.98, "%": 0.89}
_WIDTHS = {**_NARROW, **_SMALL, **_WIDE}
UPPER_EM, OTHER_EM, FOREIGN_EM = 0.73, 0.62, 1.0  # capitals, lower case and digits, anything not ASCII
DEFAULT_SIZE = 14.0  # Graphviz's default font size (a graph's or cluster's label without one)
_BOLD_CELL = re.compile(r'<TD([^>]*)>((?:<FONT POINT-SIZE="([\d.]+)"[^>]*>)?<B>(.*?)</B>)')
_FONTSIZE = re.compile(r"\bfontsize=([\d.]+)")
_BREAK = re.compile(r"<BR[^>]*/>")


def bold_em(text):
    """The width of ``text`` in bold, in ems (at least what a bold sans serif draws)."""
    return sum(_WIDTHS.get(c) or (UPPER_EM if "A" <= c <= "Z" else OTHER_EM if c < "\x80" else FOREIGN_EM)
               for c in text)


@functools.lru_cache(maxsize=4096)  # (op names and module names recur: a picture measures each once)
def _cell_width(text, size):
    """The points a bold cell of ``text`` (escaped, as in the label) needs at ``size``, its padding included."""
    em = max(bold_em(html.unescape(part)) for part in _BREAK.split(text))
    return min(math.ceil(em * size) + 2, 65535)


def _widen_line(line):
    found = _FONTSIZE.search(line)
    size = float(found.group(1)) if found else DEFAULT_SIZE

    def widen(match):
        attrs, body, point_size, text = match.groups()
        if "WIDTH=" in attrs:
            return match.group(0)
        return f'<TD{attrs} WIDTH="{_cell_width(text, float(point_size) if point_size else size)}">{body}'

    return _BOLD_CELL.sub(widen, line)


def widen_bold(source):
    """``source`` (DOT from ``dot.to_dot``) with each bold cell at least as wide as its text is drawn."""
    if "<B>" not in source:
        return source
    return "\n".join(_widen_line(line) if "<B>" in line else line for line in source.split("\n"))


def _plugin_list(exe):
    """(folder, plugin list file) of the Graphviz ``exe`` belongs to, or None."""
    prefix = os.path.dirname(os.path.dirname(os.path.realpath(exe)))
    folders = [os.path.join(prefix, lib, "graphviz") for lib in ("lib", "lib64")]
    folders += sorted(glob.glob(os.path.join(prefix, "lib", "*", "graphviz")))
    for folder in folders:
        for name in CONFIG_NAMES:
            if os.path.isfile(os.path.join(folder, name)):
                return folder, name
    return None


def _kept_plugins(text, folder):
    """The plugin list ``text`` with only the core and dot-layout libraries, their paths made absolute."""
    out, keep = [], False
    for line in text.splitlines(keepends=True):
        if line[:1] not in ("", " ", "\t", "#", "}", "\n"):  # a library's entry starts at the line's start
            name = line.split()[0]
            keep = bool(_KEPT.search(name))
            if keep and not os.path.isabs(name):
                line = line.replace(name, os.path.join(folder, name), 1)
        if keep:
            out.append(line)
    return "".join(out)


def environment():
    """The environment for a ``dot`` measuring text with its own tables, or None (see the module's text)."""
    exe = dot_program()
    if exe is None or os.environ.get("GVBINDIR") or exe in _GIVEN_UP:
        return None
    folder = _core_plugins(exe)
    return None if folder is None else dict(os.environ, GVBINDIR=folder)


def failed(exe, stderr):
    """Whether ``dot`` (``exe``) failed for want of a plugin in the cut list (its ``stderr`` says a format or a
    layout is "not recognized"): then this process runs it as installed from now on, and the caller again."""
    if b"not recognized" not in (stderr or b""):
        return False
    _GIVEN_UP.add(exe)
    return True


_GIVEN_UP = set()  # dots whose cut plugin list failed: run as installed


@functools.cache
def _core_plugins(exe):
    """A folder holding the plugin list of ``exe``'s Graphviz cut to the core and dot-layout plugins; None when
    that cannot be made. Not tried here (a ``dot`` start costs more than the layouts of a small run): a layout
    that fails with it gives it up (``failed``)."""
    found = _plugin_list(exe)
    if found is None:
        return None
    folder, name = found
    try:
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            kept = _kept_plugins(f.read(), folder)
        if not kept:
            return None
        where = tempfile.mkdtemp(prefix="gradviz-graphviz-")
        atexit.register(shutil.rmtree, where, True)
        with open(os.path.join(where, name), "w", encoding="utf-8") as f:
            f.write(kept)
    except (OSError, UnicodeDecodeError):
        return None
    return where
