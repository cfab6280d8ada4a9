"""Working graph → ``GraphSpec``: shapes, colours, labels, and the marks diagnostics leave on a picture."""

import functools
import re

from ..document import is_accumulate_grad, severity_rank
from .spec import COLORS, GraphSpec, LegendEntry, Row, SpecCluster, SpecEdge, SpecNode

CHEAP_LAYOUT = {"splines": "line", "nslimit": "2", "nslimit1": "2", "mclimit": "0.3", "remincross": "false",
                "searchsize": "10"}


def shape_text(shape):
    if shape is None:
        return "?"
    if type(shape) is tuple:  # (the working graph's shapes: a page writes the same few thousands of times)
        try:
            return _tuple_text(shape)
        except TypeError:  # a dimension that cannot be hashed: written as it is below
            pass
    return "scalar" if len(shape) == 0 else "(" + ", ".join(str(d) for d in shape) + ")"


@functools.lru_cache(maxsize=4096)
def _tuple_text(shape):
    return "scalar" if len(shape) == 0 else "(" + ", ".join(str(d) for d in shape) + ")"


def backward_calls(doc):
    """Every backward call of the run: those with full records plus those the window only counted."""
    dropped = (doc.get("dropped") or {}).get("backwards") or 0
    return len(doc.get("backwards") or ()) + dropped


def backward_checks_text(doc):
    """The budget line of the custom-Function backward checks: what was checked, with what result, and what was
    not (and why); "" when no custom Function ran."""
    section = doc.get("backward_checks") or {}
    checks = section.get("checks") or []
    repeats, over = section.get("repeats") or 0, section.get("over_budget") or 0
    if not section.get("enabled", True):
        return "off (--no-check-backward)" if checks == [] else ""
    if not checks and not over:
        return ""
    counts = {}
    for c in checks:
        counts[c.get("status")] = counts.get(c.get("status"), 0) + 1
    done = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    text = f"{len(checks)} custom Function signature{'s' * (len(checks) != 1)} checked ({done})"
    if repeats:
        text += f"; {repeats:,} later call{'s' * (repeats != 1)} with a signature already checked"
    if over:
        text += f"; {over} not checked (budget of {section.get('budget')} spent)"
    return text


def human_bytes(n):
    """Binary units, as the diagnostics' messages write them (``4.8 KiB``), so the figures match."""
    n = float(n or 0)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def _node_style(item):
    """(shape, fill, border, style) by what the item is."""
    if item.kind == "leaf":
        fill, border = COLORS["parameter" if "parameter" in item.flags else "input"]
        return "ellipse", fill, border, "filled"
    if item.kind == "const":
        return ("ellipse", *COLORS["const"], "filled,dashed")
    if item.kind == "cut":
        return ("octagon", *COLORS["cut"], "filled,dashed")
    if item.kind == "module":
        return ("box3d", *COLORS["module"], "filled")
    if item.kind == "more":
        return ("folder", *COLORS["more"], "filled")
    if item.kind in ("external", "outside"):
        return ("box", *COLORS["more"], "filled,dashed,rounded")
    colors = COLORS["custom" if "custom" in item.flags else "op"]
    return "box", colors[0], colors[1], "filled,rounded"


VARIES = "a different one each step"
BACKWARD_SUFFIX = re.compile(r"Backward\d*$")


def forward_op(node):
    """The forward op a backward node stands for: ``AddmmBackward0`` -> ``Addmm``; a custom Function's class."""
    name = node.get("class_name") or node.get("op") or "?"
    return name if node.get("custom") else BACKWARD_SUFFIX.sub("", name) or name


def tensor_name(index, var_id):
    """How a picture names a Variable: the name the trace recorded (a Python name or a parameter's module path);
    else what made it, ``Addmm of model.fc1`` (the op and the module that ran it); else what kind of leaf it
    is. ``v<id>`` only for a Variable whose record was dropped."""
    var = index.variables.get(var_id)
    if var is None:
        return f"v{var_id}"
    if var.get("name"):
        return var["name"]
    node = index.nodes.get(var.get("node"))
    if node is not None:
        modules = node.get("module") or []
        return forward_op(node) + (f" of {modules[-1]}" if modules else " output")
    if var.get("is_parameter"):
        return "parameter"
    return "input" if var.get("requires_grad") else "constant"


def common_name(names):
    """One name for names that differ only in numbers between dots: ``layers.#.weight`` for ``layers.0.weight``,
    ``layers.1.weight``…; else the first name."""
    split = [name.split(".") for name in names]
    if any(len(parts) != len(split[0]) for parts in split):
        return names[0]
    out = []
    for column in zip(*split):
        if len(set(column)) == 1:
            out.append(column[0])
        elif all(part.isdigit() for part in column):
            out.append("#")
        else:
            return names[0]
    return ".".join(out)


def _rows(item):
    rows = [Row(item.title, bold=True)]
    if item.kind not in ("more", "module", "external"):
        rows.append(Row(shape_text(item.shape), size=9))
    if "custom" in item.flags:
        rows.append(Row("custom Function", size=9, color="#7d3c98"))
    rows += [Row(line, size=9) for line in item.lines]
    if "varies" in item.flags:
        rows.append(Row(VARIES, size=9))
    if "root" in item.flags:
        rows.append(Row("root", size=9, bold=True))
    return rows


class _Styler:
    def __init__(self, ir, index, forward, show_saved, show_grads):
        self.ir, self.index, self.forward = ir, index, forward
        self.show_saved, self.show_grads = show_saved, show_grads
        self.nodes, self.edges, self.cluster_names = [], [], {}
        self.severities, self.kinds = {}, set()

    def cluster_name(self, key):
        if key not in self.cluster_names:
            self.cluster_names[key] = f"cluster_{len(self.cluster_names)}"
        return self.cluster_names[key]

    def node(self, item):
        shape, fill, border, style = _node_style(item)
        marked = self.index.severity  # (most pictures have no diagnosed node: a box's nodes are not read then)
        severity = max((marked[n] for n in item.nodes if n in marked), key=severity_rank, default=None) \
            if marked else None
        penwidth, fontsize, rows = 1.0, 11, _rows(item)
        if severity:
            fill, border = COLORS[severity]
            penwidth = 2.0
            for sev, code in (pair for n in item.nodes for pair in self.index.codes.get(n, [])):
                self.severities.setdefault(sev, set()).add(code)
        if "ghost" in item.flags:
            style, fontsize, rows = style + ",dashed", 9, rows[:1]
        if "nonfinite" in item.flags:
            rows.append(Row("NaN/Inf in output", size=9, color="#c0392b"))
        elif "nonfinite-grad" in item.flags:  # its backward produced it: the forward output was finite
            rows.append(Row("NaN/Inf in its gradient", size=9, color="#c0392b"))
        tooltip = " · ".join([r.text for r in rows])
        leaves = item.variables if item.kind in ("leaf", "const", "cut") else []
        if len(leaves) > 1:
            # a folded leaf: one per step, named by what the names share (layers.#.weight); all in the tooltip
            names = [tensor_name(self.index, v) for v in leaves]
            rows[0] = Row(common_name(names), bold=True)
            rows = [Row(f"{VARIES} ({len(names)} in all)", size=9) if r.text == VARIES else r for r in rows]
            tooltip = " · ".join([r.text for r in rows]) + " · " + ", ".join(names)
        doc_node = item.nodes[0] if len(item.nodes) == 1 else None
        doc_var = item.variables[0] if item.kind in ("leaf", "const", "cut") and item.variables else None
        self.kinds.add("parameter" if "parameter" in item.flags else item.kind if item.kind != "leaf" else "input")
        if "custom" in item.flags:
            self.kinds.add("custom")
        if "ghost" in item.flags:
            self.kinds.add("ghost")
        self.nodes.append(SpecNode(
            item.key, rows, item.kind if "ghost" not in item.flags else "ghost", shape=shape, fill=fill,
            border=border, style=style, penwidth=2.0 if "root" in item.flags else penwidth,
            peripheries=2 if "root" in item.flags else 1, fontsize=fontsize,
            cluster=self.cluster_name(item.calls[-1]) if item.calls else None, html_id=f"gv-{item.key}",
            tooltip=tooltip, doc_node=doc_node, doc_variable=doc_var, doc_nodes=list(item.nodes),
            doc_variables=list(leaves)))

    def edge(self, edge):
        src = self.ir.items[edge.src]
        tail, head = (edge.src, edge.dst) if self.forward else (edge.dst, edge.src)
        spec = SpecEdge(tail, head, kind=edge.kind)
        if edge.kind == "cut":
            spec.style, spec.color, spec.arrowhead, spec.label = "dashed", COLORS["cut"][1], "tee", "cut"
            self.kinds.add("cut-edge")
        elif edge.kind == "loop":
            spec.color, spec.penwidth, spec.constraint, spec.label = COLORS["repeat"][1], 1.5, False, "next step"
        elif self.show_grads and not self.forward:
            norm = self._norm(src)
            spec.label = "" if norm is None else f"{norm:.3g}"
        if "parameter" in src.flags and edge.kind == "data":
            # A parameter sits beside the op that uses it, not a rank above: a rank of its own makes each module
            # cluster reach into the rank of the module before it, and dot then sets the clusters side by side,
            # one step further over per block (the diagonal staircase of a residual net).
            spec.minlen = 0
        if edge.count > 1 and edge.kind == "data" and src.kind in ("leaf", "const", "cut"):
            spec.label = (spec.label + " " if spec.label else "") + f"×{edge.count}"
        self.edges.append(spec)

    def _norm(self, item):
        # The gradient that flowed into the producer's output (per node: the document keeps node-level norms).
        if len(item.nodes) != 1:
            return None
        node = self.index.nodes.get(item.nodes[0], {})
        if is_accumulate_grad(node) and node.get("variable") is not None:
            return self.index.leaf_norm.get(node["variable"], self.index.node_norm.get(item.nodes[0]))
        return self.index.node_norm.get(item.nodes[0])

    def none_reads(self):
        if not self.index.none_reads:
            return
        # (made only here: a box lists every node inside it, and most traces read no .grad as None)
        item_of_node = {n: key for key, item in self.ir.items.items() if "ghost" not in item.flags
                        for n in item.nodes}
        for var_id, event in sorted(self.index.none_reads.items()):
            var = self.index.variables.get(var_id) or {}
            owner = item_of_node.get(var.get("node")) or item_of_node.get(var.get("accumulator"))
            if owner is None:
                continue
            line = (event.get("location") or {}).get("line")
            rows = [Row(f"{tensor_name(self.index, var_id)}.grad → None", bold=True, size=10)]
            if line is not None:
                rows.append(Row(f"read at line {line}", size=9))
            key = f"e{event['id']}"
            owner_item = self.ir.items[owner]
            self.nodes.append(SpecNode(key, rows, "note", shape="note", fill=COLORS["note"][0],
                                       border=COLORS["note"][1], fontsize=10, html_id=f"gv-{key}",
                                       cluster=self.cluster_name(owner_item.calls[-1]) if owner_item.calls else None,
                                       tooltip=rows[0].text, doc_variable=var_id))
            self.edges.append(SpecEdge(key, owner, style="dotted", color=COLORS["note"][1], arrowhead="none",
                                       kind="note"))
            self.kinds.add("note")

    def saved(self):
        if not (self.show_saved or self.index.stale):
            return  # (a saved tensor is drawn when asked for or when it went stale: most pictures draw none)
        for item in sorted(self.ir.items.values(), key=lambda i: i.order):
            if item.kind != "op" or len(item.nodes) != 1 or "ghost" in item.flags:
                continue
            node = self.index.nodes[item.nodes[0]]
            stale = {e["variable"]: e for e in self.index.stale.get(node["id"], [])}
            outputs = node.get("outputs") or []
            for number, saved in enumerate(node.get("saved") or []):
                event = stale.get(saved.get("variable"))
                if event is None and saved.get("kind") == "output":   # a saved output has no variable of its own
                    event = next((stale[v] for v in outputs if v in stale), None)
                if not (self.show_saved or event):
                    continue
                self._saved_node(item, number, saved, event)

    def _saved_node(self, item, number, saved, event):
        key = f"{item.key}_s{number}"
        name = " " + tensor_name(self.index, saved["variable"]) if saved.get("variable") is not None else ""
        rows = [Row(f"saved {saved.get('kind', 'input')}{name}", size=9, bold=True),
                Row(f"{shape_text(saved.get('shape'))} · {human_bytes(saved.get('bytes'))} · "
                    f"version {saved.get('version')}", size=9)]
        fill, border = COLORS["saved"]
        if event is not None:
            rows.append(Row(f"stale: now version {event.get('new_version')} ({event.get('op')})", size=9,
                            color=COLORS["error"][1]))
            fill, border = COLORS["error"]
            self.kinds.add("stale")
        else:
            self.kinds.add("saved")
        self.nodes.append(SpecNode(key, rows, "saved", shape="cylinder", fill=fill, border=border, fontsize=9,
                                   cluster=self.cluster_name(item.calls[-1]) if item.calls else None,
                                   html_id=f"gv-{key}", tooltip=rows[0].text, doc_node=item.nodes[0],
                                   doc_variable=saved.get("variable")))
        self.edges.append(SpecEdge(key, item.key, style="dotted", color=border, arrowhead="none", kind="saved"))

    def clusters(self):
        parents = {}
        for item in self.ir.items.values():
            for outer, inner in zip([None] + item.calls, item.calls):
                parents.setdefault(inner, outer)
        specs = []
        for key in list(self.cluster_names):
            chain = [key]
            while parents.get(chain[-1]) is not None:
                chain.append(parents[chain[-1]])
            for k in chain:
                self.cluster_name(k)
        for key, name in self.cluster_names.items():
            kind, lines = self.ir.clusters.get(key, ("module", [key]))
            fill, border = COLORS.get(kind, ("#ffffff", "#999999"))
            style = "rounded,dashed" if kind == "repeat" else "rounded,filled" if kind == "retained" else "rounded"
            rows = [Row(lines[0], bold=True, size=12 if kind == "repeat" else 10)] + \
                [Row(line, size=9) for line in lines[1:]]
            parent = parents.get(key)
            specs.append(SpecCluster(name, rows, parent=self.cluster_name(parent) if parent else None,
                                     fill=fill if kind in ("retained", "repeat") else "#ffffff",
                                     border=border if kind in ("retained", "repeat", "module") else "#aaaaaa",
                                     style=style, html_id=f"gv-{name}"))
            if kind == "retained":
                self.kinds.add("retained")
        return specs

    def legend(self):
        entries = []
        for severity in ("error", "warning", "info"):
            if severity in self.severities:
                codes = ", ".join(sorted(self.severities[severity]))
                entries.append(LegendEntry(f"{severity}: {codes}", *COLORS[severity]))
        labels = {"parameter": ("parameter", "parameter"), "input": ("input", "input"),
                  "custom": ("custom Function", "custom"), "cut": (".data / detach() cut", "cut"),
                  "cut-edge": ("dashed edge: graph cut", "cut"), "ghost": ("dashed leaf: ghost of a reused leaf",
                                                                           "parameter"),
                  "module": ("collapsed module", "module"), "note": (".grad read as None", "note"),
                  "stale": ("saved tensor changed in place", "error"), "retained": ("retained graph", "retained"),
                  "saved": ("saved tensor", "saved"), "const": ("constant (no grad)", "const"),
                  "external": ("input from an earlier graph (not drawn)", "more"),
                  "outside": ("input from outside this view (in the view it opens from)", "more")}
        glyphs = {"parameter": "●", "input": "●", "const": "○", "ghost": "◌", "cut": "⯃", "cut-edge": "┄",
                  "external": "□", "outside": "□"}
        for kind, (label, color) in labels.items():
            if kind in self.kinds:
                entries.append(LegendEntry(label, *COLORS[color], glyph=glyphs.get(kind, "■")))
        return entries


def _title(index, chosen, node_ids, view):
    doc = index.doc
    script = doc.get("script") or "trace"
    if not chosen:
        return f"{script}: no graph was recorded"
    graphs = [index.graphs[g] for g in chosen]
    iterations = sorted({g.get("iteration") for g in graphs})
    parts = [script, view,
             "iteration " + ", ".join(str(i) for i in iterations)]
    if len(graphs) == 1:
        structure = index.structures.get(graphs[0].get("structure"))
        parts.append(f"graph {graphs[0]['id']}")
        if structure and structure.get("count", 1) > 1:
            parts.append(f"structure seen {structure['count']:,}×")
    else:
        parts.append(f"{len(graphs)} graphs")
    parts.append(f"{len(node_ids):,} nodes")
    return " · ".join(parts)


def style_spec(ir, index, chosen, node_ids, forward=False, show_saved=False, show_grads=False, rankdir=None,
               architecture=False):
    styler = _Styler(ir, index, forward, show_saved, show_grads)
    for item in sorted(ir.items.values(), key=lambda i: i.order):
        styler.node(item)
    for edge in sorted(ir.edges, key=lambda e: (ir.items[e.dst].order, ir.items[e.src].order, e.kind)):
        styler.edge(edge)
    styler.none_reads()
    styler.saved()
    notes = list(ir.notes)
    if any(not index.graphs[g].get("full", True) for g in chosen):
        notes.append("some node records were dropped from the trace")
    view = "architecture" if architecture else "forward data flow" if forward else "backward graph"
    spec = GraphSpec(title=_title(index, chosen, node_ids, view),
                     subtitle=notes, nodes=styler.nodes,
                     edges=styler.edges, clusters=styler.clusters(), legend=styler.legend(),
                     rankdir=rankdir or ("TB" if forward else "BT"), collapsed=bool(ir.notes))
    if not spec.nodes:
        spec.nodes.append(SpecNode("empty", [Row("nothing to draw", bold=True),
                                             Row("no graph node was recorded", size=9)], "note", shape="note"))
    if len(spec.nodes) > 2000:
        spec.layout.update(CHEAP_LAYOUT)
    return spec
