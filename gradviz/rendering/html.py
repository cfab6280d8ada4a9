"""``report.html``: one self-contained page (inline CSS, JS, SVG and JSON; nothing fetched from the network).

Every user string is escaped: HTML text with ``html.escape``, the embedded JSON so that no ``</script>`` or
``<!--`` inside a name can end its script block, and the page's script only ever sets ``textContent``.
"""

import html
import json
import re
from importlib import resources

from ..document import DocIndex
from .ranks import ranks_section
from .style import backward_calls, backward_checks_text, human_bytes

_PROLOG = re.compile(r"<\?xml.*?\?>|<!DOCTYPE.*?>|<!--.*?-->", re.S)
_SCRIPT = re.compile(r"<\s*/?\s*script", re.I)


def _asset(name):
    return resources.files(__package__).joinpath("assets", name).read_text(encoding="utf-8")


def json_for_script(data):
    """JSON safe inside ``<script type="application/json">``: no ``<``, ``>``, ``&`` or line separators."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=str)
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"),
                          ("\u2029", "\\u2029")):
        text = text.replace(char, escaped)
    return text


def inline_svg(svg):
    """An SVG document from ``dot`` as an element to inline: no XML prolog, doctype, comments or scripts."""
    svg = _PROLOG.sub("", svg).strip()
    if _SCRIPT.search(svg):
        raise ValueError("refusing to inline an SVG that contains a script element")
    return svg


def _finite(x):
    return None if x is None or x != x or x in (float("inf"), float("-inf")) else x


# --- the cap: what the page embeds is proportional to what it draws, not to the run ----------------------------
_DRAWN_ID = re.compile(r"\bgv(?:-|&#45;)([nve])(\d+)")  # dot writes the hyphen as &#45; in SVG
DIAGNOSTIC_IDS_KEPT = 200  # per diagnostic, beyond those drawn: enough to inspect, bounded on a huge run
CHART_POINTS = 1000  # the memory chart's polyline: iterations beyond this are merged (max of each bucket)


def drawn_ids(pictures):
    """{"n": node ids, "v": variable ids, "e": event ids} that appear in the pictures' SVG or DOT text."""
    drawn = {"n": set(), "v": set(), "e": set()}
    for picture in (pictures or {}).values():
        if isinstance(picture, str):
            for kind, number in _DRAWN_ID.findall(picture):
                drawn[kind].add(int(number))
    return drawn


def _kept(diag_ids, drawn):
    """A diagnostic's ids to embed: every one drawn, plus the first ``DIAGNOSTIC_IDS_KEPT`` of the others."""
    ids = list(diag_ids)
    if len(ids) <= DIAGNOSTIC_IDS_KEPT:
        return ids
    return [i for n, i in enumerate(ids) if n < DIAGNOSTIC_IDS_KEPT or i in drawn]


def report_data(doc, drawn=None):
    """What the page's inspector shows, keyed by document ids.

    ``drawn`` ({"n", "v", "e"} id sets, see ``drawn_ids``) caps it: only the nodes, variables and events in the
    pictures, the parameters, and what the diagnostics point at (bounded) are embedded; ``"omitted"`` says how
    many of each were left out. ``None`` embeds everything.
    """
    index = DocIndex(doc)
    diag_pos = {}
    diagnostics = []
    for pos, diag in enumerate(doc.get("diagnostics", [])):
        diag_pos[diag["id"]] = pos
        diag_nodes, diag_vars = list(index._diag_nodes(diag)), list(diag.get("variables") or [])
        if drawn is not None:
            diag_nodes, diag_vars = _kept(diag_nodes, drawn["n"]), _kept(diag_vars, drawn["v"])
        diagnostics.append({"code": diag["code"], "severity": diag["severity"], "message": diag["message"],
                            "hint": diag.get("hint", ""), "location": diag.get("location"),
                            "nodes": diag_nodes, "variables": diag_vars, "count": diag.get("count", 1)})
    keep_nodes = keep_vars = None
    if drawn is not None:
        keep_nodes = set(drawn["n"]).union(*(d["nodes"] for d in diagnostics))
        keep_vars = set(drawn["v"]).union(*(d["variables"] for d in diagnostics))
    stale = {(n, e["variable"]): e.get("new_version") for n, events in index.stale.items() for e in events}
    nodes = {}
    for node in doc.get("nodes", []):
        node_id = node["id"]
        if keep_nodes is not None:
            if node_id not in keep_nodes:
                continue
            keep_vars.update(v for v in [node.get("variable"), *(node.get("outputs") or [])] if v is not None)
        outs = [index.variables.get(v, {}) for v in node.get("outputs") or []]
        saved = [{"name": index.variable_label(s["variable"]) if s.get("variable") is not None else "buffer",
                  "kind": s.get("kind"), "shape": s.get("shape"), "bytes": s.get("bytes"),
                  "version": s.get("version"), "stale": stale.get((node_id, s.get("variable")))}
                 for s in node.get("saved") or []]
        leaf = node.get("variable")
        norm = index.leaf_norm.get(leaf) if leaf is not None else None
        nodes[node_id] = {
            "op": node["op"], "class_name": node.get("class_name"), "custom": bool(node.get("custom")),
            "shape": node.get("shape"), "dtype": node.get("dtype"), "graph": node.get("graph"),
            "bytes": sum(v.get("bytes", 0) for v in outs) if outs else
            index.variables.get(leaf, {}).get("bytes"),
            "variable": leaf, "variable_name": index.variable_label(leaf) if leaf is not None else None,
            "output_names": [v.get("name") for v in outs if v.get("name")],
            "module": node.get("module") or [], "location": node.get("location"),
            "grad_norm": _finite(norm if norm is not None else index.node_norm.get(node_id)),
            "saved": saved, "freed_by": node.get("freed_by"), "nonfinite": node.get("nonfinite"),
            "diagnostics": [p for p, d in enumerate(diagnostics) if node_id in d["nodes"]]}
    variables = {}
    for var in doc.get("variables", []):
        if keep_vars is not None and var["id"] not in keep_vars and not var.get("is_parameter"):
            continue
        read = index.none_reads.get(var["id"])
        variables[var["id"]] = {
            key: var.get(key) for key in ("name", "shape", "dtype", "bytes", "requires_grad", "is_leaf",
                                          "is_parameter", "origin", "module", "location")}
        variables[var["id"]].update({
            "grad_norm": _finite(index.leaf_norm.get(var["id"])),
            "grad_none_read": ((read or {}).get("location") or {}).get("line") if read else None,
            "diagnostics": [p for p, d in enumerate(diagnostics) if var["id"] in d["variables"]]})
    events = {e["id"]: {"variable": e["variable"]} for e in doc.get("events", [])
              if e.get("kind") == "grad_read" and e.get("was_none") and (drawn is None or e["id"] in drawn["e"])}
    omitted = {"nodes": len(doc.get("nodes", [])) - len(nodes),
               "variables": len(doc.get("variables", [])) - len(variables)}
    return {"nodes": nodes, "variables": variables, "diagnostics": diagnostics, "events": events,
            "omitted": omitted}


def _cap_note(data, doc):
    """The visible line saying what the page left out (empty when it embeds everything)."""
    omitted = data.get("omitted") or {}
    if not any(omitted.values()):
        return ""
    total_nodes, total_vars = len(doc.get("nodes", [])), len(doc.get("variables", []))
    return (f'<p class="muted" id="cap-note">This page embeds the details of {len(data["nodes"]):,} of '
            f'{total_nodes:,} nodes and {len(data["variables"]):,} of {total_vars:,} variables: those in the '
            f'pictures, the parameters and what the diagnostics point at. {omitted["nodes"]:,} nodes and '
            f'{omitted["variables"]:,} variables were left out to keep the page small; report.json has every '
            f'record.</p>')


def memory_chart(memory, width=520, height=140):
    """Retained bytes per iteration as an inline SVG line chart (empty string when there is no series)."""
    series = (memory or {}).get("series") or []
    if not series:
        return ""
    values = [s.get("retained_bytes", 0) for s in series]
    if len(values) > CHART_POINTS:  # a point per pixel is plenty: keep each bucket's peak
        size = -(-len(values) // CHART_POINTS)
        values = [max(values[i:i + size]) for i in range(0, len(values), size)]
    top = max(values) or 1
    left, bottom, right, top_pad = 60, 22, 10, 12
    w, h = width - left - right, height - bottom - top_pad
    step = w / max(1, len(values) - 1)
    points = " ".join(f"{left + i * step:.1f},{top_pad + h - v / top * h:.1f}" for i, v in enumerate(values))
    first, last = series[0].get("iteration", 0), series[-1].get("iteration", len(series) - 1)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
            f'aria-label="retained bytes per iteration">'
            f'<line x1="{left}" y1="{top_pad + h}" x2="{left + w}" y2="{top_pad + h}" stroke="#999"/>'
            f'<line x1="{left}" y1="{top_pad}" x2="{left}" y2="{top_pad + h}" stroke="#999"/>'
            f'<text x="{left - 4}" y="{top_pad + 4}" font-size="10" text-anchor="end">'
            f'{html.escape(human_bytes(top))}</text>'
            f'<text x="{left - 4}" y="{top_pad + h}" font-size="10" text-anchor="end">0</text>'
            f'<text x="{left}" y="{height - 6}" font-size="10">iteration {first}</text>'
            f'<text x="{left + w}" y="{height - 6}" font-size="10" text-anchor="end">{last}</text>'
            f'<polyline fill="none" stroke="#c0392b" stroke-width="2" points="{points}"/></svg>')


def _diagnostics_table(doc):
    rows = []
    for pos, diag in enumerate(doc.get("diagnostics", [])):
        loc = diag.get("location") or {}
        where = f"{loc.get('file')}:{loc.get('line')}" if loc else ""
        source = f'<pre class="src">{html.escape(loc["text"])}</pre>' if loc.get("text") else ""
        count = f' <span class="muted">(×{diag["count"]})</span>' if diag.get("count", 1) > 1 else ""
        rows.append(
            f'<tr class="diag" id="diag-{pos}" data-diag="{pos}">'
            f'<td><span class="sev {html.escape(diag["severity"])}">{html.escape(diag["severity"])}</span></td>'
            f'<td><code>{html.escape(diag["code"])}</code></td><td><code>{html.escape(where)}</code></td>'
            f'<td>{html.escape(diag["message"])}{count}{source}'
            f'<div class="hint">{html.escape(diag.get("hint") or "")}</div></td></tr>')
    if not rows:
        return '<p class="muted">No diagnostics: nothing suspicious was found.</p>'
    return ('<table class="diags"><tr><th>severity</th><th>code</th><th>where</th><th>what</th></tr>'
            + "".join(rows) + '</table><div id="diag-status" class="muted"></div>')


def default_svgs(doc, budget=4.0, **options):
    """One picture per distinct graph structure (first and last graph where they differ): {title: svg}."""
    from . import to_dot
    from .graph import build_graph
    from .layout import dot_available, lay_out
    from .pictures import pictures_to_draw

    pictures = {}
    for picture in pictures_to_draw(doc)[:12]:
        if dot_available():
            _, _, data = lay_out(doc, "svg", budget, graphs=[picture.graph], **options)
            pictures[picture.title] = data.decode("utf-8")
        else:
            pictures[picture.title] = None
            pictures[picture.title + " (DOT source)"] = to_dot(build_graph(doc, graphs=[picture.graph], **options))
    return pictures


def _picture_blocks(pictures):
    from .layout import DOT_MISSING

    blocks = []
    for title, svg in pictures.items():
        if svg is None:
            blocks.append(f'<div class="picture"><h3>{html.escape(title)}</h3>'
                          f'<p class="nopic">No picture: {html.escape(DOT_MISSING)}</p></div>')
        elif title.endswith("(DOT source)"):
            blocks.append(f'<div class="picture"><h3>{html.escape(title)}</h3><pre>{html.escape(svg)}</pre></div>')
        else:
            blocks.append(f'<div class="picture"><h3>{html.escape(title)}</h3>{inline_svg(svg)}</div>')
    return "".join(blocks) or '<p class="muted">No graph was recorded.</p>'


def _skipped_blocks(skipped, pending):
    """The pictures that could not be drawn, each with its reason; or, while they are still being drawn, a note
    that stays on the page if gradviz is stopped before it finishes them."""
    parts = []
    if pending:
        parts.append('<p class="nopic" id="pictures-pending">The pictures were still being drawn when this page '
                     'was written; if this note is still here, gradviz was stopped before it finished them.</p>')
    if skipped:
        items = "".join(f'<li><code>{html.escape(item.get("file") or "")}</code> '
                        f'{html.escape(item.get("picture") or "")}: {html.escape(item.get("reason") or "")}</li>'
                        for item in skipped)
        parts.append(f'<div id="skipped"><p><b>{len(skipped)} picture{"s" * (len(skipped) != 1)} skipped</b> '
                     f'(the report is complete without them):</p><ul>{items}</ul></div>')
    return "".join(parts)


def _ending(doc):
    """How the script ended, in words, or "" for a plain finish: ``exited with status 3 (sys.exit)``."""
    status = doc.get("status") or {}
    code, ending = status.get("exit_code"), status.get("ending")
    if ending == "exit" and code:
        return f"exited with status {code} (sys.exit)"
    if ending == "interrupted":
        return "interrupted (KeyboardInterrupt, exit status 130)"
    return ""


def _memory_section(doc):
    memory = doc.get("memory") or {}
    if not memory:
        return '<p class="muted">No memory figures in this trace.</p>'
    return (f'<p>peak retained <b>{human_bytes(memory.get("peak_retained_bytes"))}</b>, final '
            f'<b>{human_bytes(memory.get("final_retained_bytes"))}</b> (saved tensors of graphs that backward has '
            f'finished with, still alive)</p><div class="chart">{memory_chart(memory)}</div>')


def _summary(doc):
    graphs, structures = doc.get("graphs", []), doc.get("structures", [])
    status = doc.get("status") or {}
    exc = status.get("exception")
    built = sum(s.get("count", 1) for s in structures) or len(graphs)   # as the terminal summary counts them
    parts = [f"{built:,} graphs built, {len(structures)} distinct structure{'s' * (len(structures) != 1)}",
             f"{len(doc.get('nodes', [])):,} nodes recorded", f"{backward_calls(doc):,} backward calls"]
    elided = (doc.get("dropped") or {}).get("elided_nodes")
    if elided:  # a giant graph's middle (tracing/elide.py)
        parts.insert(2, f"{elided:,} more nodes elided")
    if exc:
        parts.append(f"stopped by {exc.get('type')}: {exc.get('message')}")
    if _ending(doc):
        parts.append(_ending(doc))
    if backward_checks_text(doc):
        parts.append("backward checks: " + backward_checks_text(doc))
    return " · ".join(html.escape(p) for p in parts)


def html_report(doc, svgs=None, skipped=(), pending=False):
    """The whole report page as a string. ``svgs``: {title: svg text} pictures; default: rendered here.
    ``skipped``: [{"file", "picture", "reason"}] pictures that could not be drawn; ``pending``: the pictures are
    still to be drawn (the page says so). Node details are embedded for what the pictures show only."""
    pictures = svgs if svgs is not None else default_svgs(doc)
    data = report_data(doc, drawn_ids(pictures))
    title = f"gradviz report: {doc.get('script') or 'trace'}"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)}</title><style>{_asset('report.css')}</style></head><body>"
        f'<header><h1>{html.escape(title)}</h1><div class="sub">{_summary(doc)}</div></header>'
        f'<main><div id="left">{ranks_section(doc)}'
        f'<h2>Graphs</h2>{_skipped_blocks(skipped, pending)}{_cap_note(data, doc)}'
        f'<div id="pictures">{_picture_blocks(pictures)}</div>'
        f'<h2>Diagnostics</h2><div id="diagnostics">{_diagnostics_table(doc)}</div>'
        f'<h2>Memory</h2><div id="memory">{_memory_section(doc)}</div>'
        '</div><aside id="inspector"><h2>Inspector</h2><div id="inspector-body">'
        '<p class="muted">Click a node in a graph to see its op, shape, dtype, bytes, source line, saved tensors '
        'and gradient norm; click a diagnostic to highlight its nodes.</p></div></aside></main>'
        f'<script type="application/json" id="gv-data">{json_for_script(data)}</script>'
        f"<script>{_asset('report.js')}</script></body></html>\n")


def notebook_fragment(doc, budget=4.0, **options):
    """A small HTML block for Jupyter: summary, the last iteration's graph, the diagnostics."""
    from . import to_dot
    from .graph import build_graph
    from .layout import DOT_MISSING, dot_available, lay_out

    if doc.get("graphs"):
        if dot_available():
            _, _, data = lay_out(doc, "svg", budget, **options)
            picture = inline_svg(data.decode("utf-8"))
        else:
            picture = (f"<p>{html.escape(DOT_MISSING)}</p><details><summary>DOT source</summary><pre>"
                       f"{html.escape(to_dot(build_graph(doc, **options)))}</pre></details>")
    else:
        picture = "<p>No graph was recorded.</p>"
    items = "".join(f"<li><b>{html.escape(d['severity'])}</b> <code>{html.escape(d['code'])}</code> "
                    f"{html.escape(d['message'])}</li>" for d in doc.get("diagnostics", []))
    return (f'<div class="gradviz-trace"><p><b>gradviz trace</b> · {_summary(doc)}</p>{picture}'
            + (f"<ul>{items}</ul>" if items else "") + "</div>")
