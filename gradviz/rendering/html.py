"""``report.html``: one self-contained page (inline CSS, JS, SVG and JSON; nothing fetched from the network).

Every user string is escaped: HTML text with ``html.escape``, the embedded JSON so that no ``</script>`` or
``<!--`` inside a name can end its script block, and the page's script only ever sets ``textContent``.
"""

import functools
import html
import json
import os
import re
from importlib import resources
from urllib.parse import quote

from ..document import DocIndex
from .ranks import ranks_section
from .style import backward_calls, backward_checks_text, human_bytes, tensor_name
from .svg import inline_svg
from .verdict import stopped_at, verdict_text


@functools.cache  # a run writes the page twice (before and after its pictures): the files are read once
def _asset(name):
    return resources.files(__package__).joinpath("assets", name).read_text(encoding="utf-8")


def json_for_script(data):
    """JSON safe inside ``<script type="application/json">``: no ``<``, ``>``, ``&`` or line separators."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=str)
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"),
                          ("\u2029", "\\u2029")):
        text = text.replace(char, escaped)
    return text


class Encoded(str):
    """A value's ``json_for_script`` text, encoded once for several writes of one page: ``json_pieces_for_script``
    writes it as it is."""


def json_pieces_for_script(data):
    """``json_for_script(data)`` of a dict with string keys, one key at a time: the same text in pieces, so a
    long run's page data is never one string and, while it is escaped, a copy of it."""
    yield "{"
    for number, (key, value) in enumerate(data.items()):
        yield f"{',' if number else ''}{json_for_script(key)}:"
        yield value if isinstance(value, Encoded) else json_for_script(value)
    yield "}"


def _finite(x):
    """A number to print, or None: NaN/Inf (in a document, the strings "nan", "inf") print nothing."""
    if not isinstance(x, (int, float)) or x != x or x in (float("inf"), float("-inf")):
        return None
    return x


# --- the cap: what the page embeds is proportional to what it draws, not to the run ----------------------------
# dot writes the hyphen as &#45; in SVG. (Not at a word's start only: ``\b`` first costs the regex its quick scan
# for "gv", 16 times slower on a transformer's views; ``_drawn_id_pairs`` checks the start itself.)
_DRAWN_ID = re.compile(r"gv(?:-|&#45;)([nve])(\d+)")


def _drawn_id_pairs(text):
    """[(kind, number)] of the element ids ``gv-n17`` (``gv&#45;n17``) in ``text`` that start a word."""
    return [match.groups() for match in _DRAWN_ID.finditer(text)
            if not match.start() or not (text[match.start() - 1].isalnum() or text[match.start() - 1] == "_")]
DIAGNOSTIC_IDS_KEPT = 200  # per diagnostic, beyond those drawn: enough to inspect, bounded on a huge run
CHART_POINTS = 1000  # the memory chart's polyline: iterations beyond this are merged (max of each bucket)


def drawn_ids(pictures):
    """{"n": node ids, "v": variable ids, "e": event ids} that appear in the pictures' SVG or DOT text."""
    drawn = {"n": set(), "v": set(), "e": set()}
    for picture in (pictures or {}).values():
        if isinstance(picture, str):
            for kind, number in _drawn_id_pairs(picture):
                drawn[kind].add(int(number))
    return drawn


def _kept(diag_ids, drawn):
    """A diagnostic's ids to embed: every one drawn, plus the first ``DIAGNOSTIC_IDS_KEPT`` of the others."""
    ids = list(diag_ids)
    if len(ids) <= DIAGNOSTIC_IDS_KEPT:
        return ids
    return [i for n, i in enumerate(ids) if n < DIAGNOSTIC_IDS_KEPT or i in drawn]


def _saved_name(index, node, saved):
    """What a saved tensor is, by what holds it: its recorded name, else the op and module that made it
    (``Relu of model.0.layers.1``), else which of the node's inputs or outputs it is (the trace names no
    argument: ``input 0 of Mm``)."""
    var = saved.get("variable")
    if var is not None and index.variables.get(var) is not None:
        return tensor_name(index, var)
    what = saved.get("kind") or "tensor"
    number = saved.get("index")
    return f"{what}{'' if number is None else f' {number}'} of {node.get('op', 'this op').removesuffix('Backward0')}"


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
            if node.get("variable") is not None:  # outputs are named in the node's own record
                keep_vars.add(node["variable"])
        outs = [index.variables.get(v, {}) for v in node.get("outputs") or []]
        saved = [{"name": _saved_name(index, node, s),
                  "kind": s.get("kind"), "shape": s.get("shape"), "bytes": s.get("bytes"),
                  "version": s.get("version"), "stale": stale.get((node_id, s.get("variable")))}
                 for s in node.get("saved") or []]
        leaf = node.get("variable")
        norm = index.leaf_norm.get(leaf) if leaf is not None else None
        nodes[node_id] = {
            "op": node["op"], "class_name": node.get("class_name"), "custom": bool(node.get("custom")),
            "shape": node.get("shape"), "dtype": node.get("dtype"), "graph": node.get("graph"),
            "bytes": sum([v.get("bytes", 0) for v in outs]) if outs else
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


def memory_chart(memory, width=640, height=170):
    """Per iteration, as an inline SVG: retained bytes when it ended (red), the highest retained bytes during it
    (light red, when the document has it: an iteration's peak comes before its backward, its end after) and live
    graphs (blue, right axis); the run's peak ``memory.peak_retained_bytes`` is marked by a dashed line and, when
    the series says where, a dot on its iteration. Empty string when there is no series."""
    series = (memory or {}).get("series") or []
    if not series:
        return ""
    values = [s.get("retained_bytes") or 0 for s in series]
    measured = [s.get("measured", True) for s in series]  # a light iteration's peak was not measured
    tops = [s.get("peak_retained_bytes") for s in series]
    tops = [t if t is not None else (v if m else None) for t, v, m in zip(tops, values, measured)] \
        if any(t is not None for t in tops) else None
    alive = [s.get("graphs_alive") or 0 for s in series]
    iterations = [s.get("iteration", i) for i, s in enumerate(series)]
    if len(values) > CHART_POINTS:  # a point per pixel is plenty: keep each bucket's peak
        size = -(-len(values) // CHART_POINTS)

        def buckets(xs):
            return [max([x for x in xs[i:i + size] if x is not None], default=None) for i in range(0, len(xs), size)]
        values, alive, iterations = buckets(values), buckets(alive), iterations[::size]
        tops = buckets(tops) if tops else None
    peak = max([memory.get("peak_retained_bytes") or 0, *values, *[t for t in tops or () if t is not None]])
    top, top_alive = peak or 1, max(alive) or 1
    left, right, bottom, top_pad = 64, 44, 24, 14
    w, h = width - left - right, height - bottom - top_pad
    step = w / max(1, len(values) - 1)

    def y(v, scale):
        return top_pad + h - v / scale * h

    def line(xs, scale):  # (None: not measured; the line joins the measured points around it)
        return " ".join(f"{left + i * step:.1f},{y(v, scale):.1f}" for i, v in enumerate(xs) if v is not None)
    first, last = series[0].get("iteration", 0), series[-1].get("iteration", len(series) - 1)
    peak_y = y(peak, top)
    text = 'font-size="10" font-family="sans-serif"'
    marks = ""
    if tops and peak in tops:
        at = tops.index(peak)
        marks = (f'<circle id="memory-peak-at" cx="{left + at * step:.1f}" cy="{peak_y:.1f}" r="4" fill="#c0392b" '
                 f'data-iteration="{iterations[at]}"><title>peak {html.escape(human_bytes(peak))} during iteration '
                 f'{iterations[at]}</title></circle>')
    peaks = (f'<polyline id="memory-peaks" fill="none" stroke="#e6a19a" stroke-width="1.5" '
             f'points="{line(tops, top)}"/>' if tops else "")
    where = f" (iteration {iterations[tops.index(peak)]})" if tops and peak in tops else ""
    return (f'<svg id="memory-chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'role="img" aria-label="retained bytes and live graphs per iteration" data-peak-bytes="{peak}" '
            f'data-points="{len(values)}">'
            f'<line x1="{left}" y1="{top_pad + h}" x2="{left + w}" y2="{top_pad + h}" stroke="#999"/>'
            f'<line x1="{left}" y1="{top_pad}" x2="{left}" y2="{top_pad + h}" stroke="#999"/>'
            f'<line x1="{left + w}" y1="{top_pad}" x2="{left + w}" y2="{top_pad + h}" stroke="#bbb"/>'
            f'<text x="{left - 4}" y="{top_pad + h}" {text} text-anchor="end">0</text>'
            f'<text x="{left + w + 4}" y="{top_pad + h}" {text}>0</text>'
            f'<text x="{left + w + 4}" y="{top_pad + 4}" {text} fill="#2874a6">{top_alive:,}</text>'
            f'<text x="{left}" y="{height - 8}" {text}>iteration {first}</text>'
            f'<text x="{left + w}" y="{height - 8}" {text} text-anchor="end">{last}</text>'
            f'<line id="memory-peak" x1="{left}" y1="{peak_y:.1f}" x2="{left + w}" y2="{peak_y:.1f}" '
            f'stroke="#c0392b" stroke-dasharray="4 3" data-bytes="{peak}"/>'
            f'<text x="{left - 4}" y="{peak_y + 4:.1f}" {text} text-anchor="end" fill="#c0392b">'
            f'{html.escape(human_bytes(peak))}</text>'
            f'<text x="{left + 6}" y="{max(peak_y - 3, 10):.1f}" {text} fill="#c0392b">peak '
            f'{html.escape(human_bytes(peak))}{where}</text>'
            f'<polyline id="memory-graphs" fill="none" stroke="#2874a6" stroke-width="1.5" '
            f'points="{line(alive, top_alive)}"/>{peaks}'
            f'<polyline id="memory-retained" fill="none" stroke="#c0392b" stroke-width="2" '
            f'points="{line(values, top)}"/>{marks}</svg>')


_SEVERITY_RANK = {"error": 0, "warning": 1, "info": 2}


def diagnostic_order(doc):
    """Positions of the document's diagnostics, most severe first, then by line (then as emitted)."""
    diags = doc.get("diagnostics", [])

    def key(pos):
        diag = diags[pos]
        line = (diag.get("location") or {}).get("line")
        return _SEVERITY_RANK.get(diag.get("severity"), 3), line if isinstance(line, int) else 1 << 60, pos
    return sorted(range(len(diags)), key=key)


def with_code(text):
    """Escaped ``text`` with `backticked` parts as <code> (an unpaired backtick stays a backtick)."""
    parts = (text or "").split("`")
    if len(parts) % 2 == 0:
        parts[-2:] = ["`".join(parts[-2:])]
    return "".join(f"<code>{html.escape(p)}</code>" if i % 2 else html.escape(p) for i, p in enumerate(parts))


def _source_link(loc):
    if not loc or not loc.get("file"):
        return ""
    where = f"{loc['file']}:{loc.get('line')}"
    href = "file://" + quote(str(loc["file"])) if str(loc["file"]).startswith("/") else None
    label = html.escape(os.path.basename(str(loc["file"])) + f":{loc.get('line')}")
    if href:
        return f'<a class="srcloc" href="{html.escape(href)}" title="{html.escape(where)}">{label}</a>'
    return f'<code class="srcloc" title="{html.escape(where)}">{label}</code>'


def _diagnostic_bar(doc):
    """The top bar: every diagnostic, most severe first, each with its nodes to step through."""
    diags = doc.get("diagnostics", [])
    if not diags:  # the terminal's first line, word for word (``verdict.py``)
        note = verdict_text(doc, stopped_at(doc))
        return f'<p class="muted" id="no-diagnostics">{html.escape(note)}</p>'
    rows = []
    for pos in diagnostic_order(doc):
        diag = diags[pos]
        loc = diag.get("location") or {}
        count = f' <span class="muted">(×{diag["count"]})</span>' if diag.get("count", 1) > 1 else ""
        source = f'<code class="srcline">{html.escape(loc["text"].strip())}</code>' if loc.get("text") else ""
        severity = html.escape(diag["severity"])
        rows.append(
            f'<div class="dentry" id="diag-{pos}" data-diag="{pos}" tabindex="0">'
            f'<span class="sev {severity}">{severity}</span> <code class="dcode">{html.escape(diag["code"])}</code>'
            f' {_source_link(loc)} <span class="msg">{with_code(diag["message"])}{count}</span>'
            f'<span class="step"><button class="prev" title="previous node (p)">‹</button>'
            f'<span class="steppos"></span><button class="next" title="next node (n)">›</button></span>'
            f'<div class="dmore">{source}<span class="hint">{with_code(diag.get("hint") or "")}</span></div>'
            '</div>')
    return "".join(rows) + '<div id="diag-status" class="muted"></div>'


def _unseen_banner(doc):
    """What ran beyond the trace's sight, first on the page; and plainly when the trace saw no graph at all."""
    items = []
    for entry in doc.get("unseen") or []:
        count = entry.get("count") or 1
        parts = [f'<b>{html.escape(str(entry.get("kind") or ""))}</b>: {with_code(str(entry.get("what") or ""))}'
                 + (f" (×{count:,})" if count > 1 else "")]
        if entry.get("how"):
            parts.append(with_code(str(entry["how"])))
        loc = entry.get("location")
        if loc:
            parts.append(_source_link(loc))
        if entry.get("advice"):
            parts.append(f'<span class="hint">{with_code(str(entry["advice"]))}</span>')
        items.append("<li>" + " · ".join(parts) + "</li>")
    if not doc.get("graphs") and not any(e.get("kind") == "no-autograd" for e in doc.get("unseen") or []):
        items.insert(0, "<li><b>no graph</b>: the trace saw no autograd graph at all, so nothing here says the run "
                        "is fine.</li>")
    if not items:
        return ""
    return ('<section id="unseen"><b>Not seen by this trace</b> (this report says nothing about it):<ul>'
            + "".join(items) + "</ul></section>")


def _model_parameters(doc):
    """The parameter records of the model being trained: those an optimizer handles, a called module names, or
    a graph reads; and how many other ``nn.Parameter``s were made (a template layer ``TransformerEncoder``
    copies, say: never called, read or optimized)."""
    optimized = {p for e in doc.get("events", []) if e.get("kind") == "optimizer" for p in e.get("parameters") or []}
    kept, others = [], 0
    for var in doc.get("variables", []):
        if not var.get("is_parameter"):
            continue
        if var["id"] in optimized or var.get("name") or var.get("accumulator") is not None:
            kept.append(var)
        else:
            others += 1
    return kept, others


def _parameter_table(doc):
    index = DocIndex(doc)
    rows = []
    params, others = _model_parameters(doc)
    note = (f'<p class="muted" id="other-parameters">{others:,} more <code>nn.Parameter</code>'
            f'{"s" * (others != 1)} made by the script but never called in a module, read by a graph or '
            f'handed to an optimizer (a template layer a container copies, say) are left out.</p>' if others else "")
    for var in params:
        norm = _finite(index.leaf_norm.get(var["id"]))
        got = var["id"] in index.leaf_norm
        shape = "(" + ", ".join(str(d) for d in var.get("shape") or []) + ")"
        rows.append(f'<tr data-variable="{var["id"]}"><td><code>{html.escape(index.variable_label(var["id"]))}</code>'
                    f'</td><td>{html.escape(shape)}</td><td>{"" if norm is None else f"{norm:.4g}"}</td>'
                    f'<td class="{"yes" if got else "no"}">{"yes" if got else "no"}</td></tr>')
    if not rows:
        return '<p class="muted">No parameters in this trace.</p>' + note
    return ('<table id="parameters" class="params"><tr><th>parameter</th><th>shape</th><th>grad norm</th>'
            '<th>got a gradient</th></tr>' + "".join(rows) + "</table>" + note)


def _pictures_from_svgs(svgs):
    """Views for pictures given as {title: svg or DOT source or None} (``gradviz run`` while drawing; tests)."""
    from .views import View

    views = []
    for number, (title, svg) in enumerate(svgs.items()):
        view = View(f"p{number}", -1, title)
        if svg is None:
            from .layout import DOT_MISSING
            view.error = DOT_MISSING
        elif title.endswith("(DOT source)"):
            view.source = svg
        else:
            view.svg = svg
        views.append(view)
    return views


def _view_templates(views):
    """One ``<template>`` per drawn view, each its own piece of the page."""
    blocks = []
    for view in views:
        if view.same_as or view.packed is not None:  # packed views are in the data (``_view_data``)
            continue
        if view.svg is not None:
            body = inline_svg(view.svg)
        elif view.source is not None:
            from .layout import DOT_MISSING
            body = (f'<div class="nopic"><p>No picture: {html.escape(DOT_MISSING)}</p><pre>'
                    f'{html.escape(view.source)}</pre></div>')
        else:
            body = f'<div class="nopic">No picture: {html.escape(view.error or "not drawn")}</div>'
        blocks.append(f'<template id="tpl-{html.escape(view.key)}">{body}</template>')
    return blocks


def _structure_label(structure):
    """``structure 3 · 40 graphs · 12 nodes · iterations 0–39``: an entry of the page's structure list."""
    count, its = structure.get("count", 1), structure.get("iterations") or []
    span = ""
    if its:
        first, last = its[0], its[-1]
        span = f" · iteration {first}" if first == last else f" · iterations {first}–{last}"
    return (f"structure {structure['id']} · {count} graph{'s' * (count != 1)} · "
            f"{structure.get('node_count', 0):,} nodes{span}")


def _view_data(views, doc):
    """The views' metadata for the page's script; where each drawn id is ({"n17": view key}); the packed views
    ({key: deflated SVG, base64}); and for each node drawn under no id of its own (a folded loop's later steps
    when the unfolded view is left out, say), the smallest element standing for it: {"n17": [view key, id]}."""
    out, where, packed, stand = [], {}, {}, {}
    structures = {s["id"]: s for s in doc.get("structures", [])}
    for view in views:
        label = _structure_label(structures[view.structure]) if view.structure in structures else view.title
        out.append({"key": view.key, "title": view.title, "label": label, "graph": view.graph,
                    "structure": view.structure,
                    "iteration": view.iteration, "which": view.which, "parent": view.parent, "box": view.box,
                    "same_as": view.same_as, "alias": {str(k): v for k, v in view.alias.items()},
                    "boxes": view.boxes, "opens": view.opens,
                    "drawn": view.svg is not None or view.graph_data is not None,
                    "layout": "page" if view.graph_data is not None else "", "kind": view.kind,
                    "holds": {elem: ids for elem, ids in view.stands}, "error": view.error,
                    "note": view.note})
        for kind, number in _drawn_id_pairs(view.svg or view.source or view.graph_data or ""):
            where.setdefault(f"{kind}{number}", view.key)
        if view.packed is not None:
            packed[view.key] = view.packed
    sizes = {}
    for view in views:
        for elem, ids in view.stands:
            for node in ids:
                key = f"n{node}"
                if key not in where and len(ids) < sizes.get(key, 1 << 60):
                    sizes[key], stand[key] = len(ids), [view.key, elem]
    return out, where, packed, stand


SEARCH_ROWS = 8000  # distinct (op, module, line) rows the search box knows beyond the embedded details


def _search_index(doc):
    """[first node id, op, innermost module path, "file:line", graph, count] per distinct op, module and line,
    over every node of the document (the first ``SEARCH_ROWS`` of them): search reaches the nodes whose details
    the page leaves out and says how many share the row, while a loop's repeats cost one row."""
    rows = {}
    for node in doc.get("nodes", []):
        loc = node.get("location") or {}
        where = f"{os.path.basename(str(loc.get('file') or ''))}:{loc.get('line')}" if loc else ""
        key = (node.get("class_name") if node.get("custom") else node["op"], (node.get("module") or [""])[-1], where)
        row = rows.get(key)
        if row is not None:
            row[5] += 1
        elif len(rows) < SEARCH_ROWS:
            rows[key] = [node["id"], *key, node.get("graph"), 1]
    return list(rows.values())


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
    series = memory.get("series") or []
    note = ""
    if series and not any(s.get("retained_bytes") for s in series) and memory.get("peak_retained_bytes"):
        note = ('<p class="muted" id="memory-note">Retained bytes are 0 at the end of every iteration: each '
                'backward freed what its graph saved. The peak was reached inside an iteration, before its '
                'backward; live graphs still count the graphs kept alive.</p>')
    during = ('<span class="key-peaks">the highest during it</span>, ' if any("peak_retained_bytes" in s
                                                                           for s in series) else "")
    light = sum(1 for s in series if s.get("measured") is False)
    if light:
        note += (f'<p class="muted" id="memory-light">{light:,} of {len(series):,} iterations were light '
                 '(watched, their ops not recorded): the highest retained bytes during them is not measured, and '
                 'the line joins the iterations around them. Their end values count the graphs alive, estimated.'
                 '</p>')
    return (f'<p>peak retained <b>{human_bytes(memory.get("peak_retained_bytes"))}</b>, final '
            f'<b>{human_bytes(memory.get("final_retained_bytes"))}</b> (saved tensors of graphs that backward has '
            f'not freed, still alive). Per iteration: <span class="key-retained">retained bytes at its end</span>, '
            f'{during}<span class="key-graphs">live graphs</span></p>'
            f'<div class="chart">{memory_chart(memory)}</div>{note}')


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


def html_report(doc, svgs=None, skipped=(), pending=False, views=None, view_options=None):
    """The whole report page as a string (``html_parts`` joined).

    ``svgs``: {title: svg text} pictures shown as they are (no module views); ``views``: ``views.View``s; by
    default the page draws its own (``views.page_views``: depth fitted to a node budget, collapsed modules
    opening on click; ``view_options`` go to ``page_views``). ``skipped``: [{"file", "picture", "reason"}]
    pictures that could not be drawn; ``pending``: the pictures are still to be drawn (the page says so).
    """
    return "".join(html_parts(doc, svgs, skipped, pending, views, view_options))


def _trace_parts(doc):
    """The page's pieces that say what the trace holds, whatever is drawn: the same text at each write of the page
    (``gradviz run`` writes it before its pictures and again with them)."""
    return {"search": Encoded(json_for_script(_search_index(doc))),
            "order": Encoded(json_for_script(diagnostic_order(doc))), "summary": _summary(doc),
            "unseen": _unseen_banner(doc), "bar": _diagnostic_bar(doc),
            "details": f'{ranks_section(doc)}<h2>Memory</h2><div id="memory">{_memory_section(doc)}</div>'
                       f'<h2>Parameters</h2>{_parameter_table(doc)}'}


def html_parts(doc, svgs=None, skipped=(), pending=False, views=None, view_options=None, reuse=None):
    """The report page as a list of strings to write one after the other (``html_report``'s arguments): the
    pictures' templates and the data's keys are pieces of their own, so writing the page never holds it whole,
    nor its encoded bytes. ``reuse``: a dict kept by the caller between writes of the same document, whose
    trace-only pieces (``_trace_parts``) are built at the first and read at the next."""
    notes = []
    trace = (reuse or {}).get("trace")
    if trace is None:
        trace = _trace_parts(doc)
        if reuse is not None:
            reuse["trace"] = trace
    if views is None:
        if svgs is not None:
            views = _pictures_from_svgs(svgs)
        else:
            from .views import page_views
            views, notes = page_views(doc, **(view_options or {}))
    view_data, where, packed, stand = _view_data(views, doc)
    drawn = {"n": set(), "v": set(), "e": set()}  # as ``drawn_ids`` finds them: ``where`` has each once
    for key in where:
        drawn[key[0]].add(int(key[1:]))
    data = report_data(doc, drawn)
    data["views"], data["where"], data["packed"], data["stand"] = view_data, where, packed, stand
    data["search"], data["order"] = trace["search"], trace["order"]
    title = f"gradviz report: {doc.get('script') or 'trace'}"
    view_notes = "".join(f'<p class="muted">{with_code(n)}</p>' for n in notes)
    empty = ""
    if not views and not pending:
        empty = ('<p class="muted" id="no-graph">No graph was recorded.</p>' if not doc.get("graphs") else
                 '<p class="muted" id="no-graph">The graphs were not drawn for this page (<code>gradviz run '
                 '--no-render</code>); report.json has them.</p>')
    script = _asset("vendor/svg-pan-zoom.min.js") + "\n" + _asset("report.js") + "\n" + _asset("layout.js") + "\n" + \
        _asset("viewer.js")
    head = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)}</title><style>{_asset('report.css')}</style></head><body>"
        f'<header><div class="titles"><h1>{html.escape(title)}</h1><div class="sub">{trace["summary"]}</div></div>'
        '<div id="searchbox"><input id="search" type="search" autocomplete="off" '
        'placeholder="search ops, parameters, modules, lines  ( / )" aria-label="search the graphs">'
        '<div id="search-results" hidden></div></div></header>'
        f'{trace["unseen"]}<section id="diagbar">{trace["bar"]}</section>'
        '<main><div id="viewer"><div id="toolbar">'
        '<label>structure <select id="structure-select"></select></label>'
        '<span id="iterations"></span><span id="crumbs"></span>'
        '<span class="tools"><button id="zoom-out" title="zoom out (-)">−</button>'
        '<button id="zoom-in" title="zoom in (+)">+</button><button id="fit" title="fit to screen (0)">fit</button>'
        '</span></div><div id="view-note" class="muted"></div>'
        f'{_skipped_blocks(skipped, pending)}{empty}<div id="stage"></div>{_cap_note(data, doc)}{view_notes}</div>'
        '<aside id="inspector"><h2>Inspector</h2><div id="inspector-body">'
        '<p class="muted">Click a node to see its op, shape, dtype, bytes, source line, saved tensors and gradient '
        'norm; a module box opens its inside. Keys: / search, j/k diagnostics, n/p their nodes, +/− zoom, 0 fit, '
        'Esc back.</p></div></aside></main>'
        f'<section id="details">{trace["details"]}</section>')
    return [head, *_view_templates(views), '<script type="application/json" id="gv-data">',
            *json_pieces_for_script(data), "</script>", f"<script>{script}</script></body></html>\n"]


def notebook_fragment(doc, budget=4.0, **options):
    """A small HTML block for Jupyter: summary, the last iteration's graph, the diagnostics."""
    from .dot import to_dot
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
