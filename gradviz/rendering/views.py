"""What report.html's graph viewer shows: one view per picture (a structure's first and last graph), each drawn
at the module depth that fits a node budget, plus a pre-rendered view of the inside of every collapsed module
box, recursively, within a byte cap. Reads the document only; Graphviz lays out each view.

A structure's last graph is usually drawn exactly like its first (same ops, same shapes, other ids): it is then
embedded once, and the last graph's nodes are mapped onto the first one's (``alias``), so deep links, search and
diagnostics still land on the node that stands for them.
"""

import re
from dataclasses import dataclass, field

from .pictures import pictures_to_draw

NODE_BUDGET = 80  # nodes per view: readable at one zoom step on a laptop screen
SVG_BYTES_CAP = 3 * 1024 * 1024  # all views together; keeps report.html under 5 MiB on a 5,000-node run
MAX_LEVELS = 8  # nested module views below a picture
_ID = re.compile(r"\b(gv(?:-|&#45;))?([nve])(\d+)\b")
_BOX_ID = re.compile(r"^gv-(b\d+)$")
_SLIM = re.compile(r'<title>[^<]*</title>\n?| font-family="Helvetica,sans-Serif"')
# what two alike graphs' pictures differ in besides ids: the heading's numbers, clusters numbered in walk order
_HEADER = re.compile(r"iteration \d+ · graph \d+|(?<=cluster_)\d+")


@dataclass
class View:
    key: str  # "g3", or "g3-b2" for the inside of box b2 of view g3
    graph: int
    title: str
    svg: str | None = None  # None: see ``source`` or ``error``
    source: str | None = None  # DOT source when Graphviz is missing
    error: str | None = None
    parent: str | None = None  # the view whose box this one opens
    box: str | None = None  # the box's SVG id in the parent, "gv-b2"
    structure: int | None = None
    iteration: int | None = None
    which: str = ""
    same_as: str | None = None  # key of the view drawn identically (this one is not embedded)
    alias: dict = field(default_factory=dict)  # {node id of this graph: node id drawn in same_as}
    boxes: list = field(default_factory=list)  # box ids of this view that open an inside view


def slim(svg):
    """dot's SVG without what the page does not use: each element's <title> (its DOT name, shown as a tooltip
    over the real one) and the font family repeated on every text (the page's style sets it once)."""
    return _SLIM.sub("", svg)


def _module_paths(node):
    return node.get("module") or []


def _depth_for_budget(doc, graph, level, budget, options):
    """The deepest module depth (> ``level``) at which the graph's picture has at most ``budget`` nodes, else
    ``level + 1`` (the picture is then capped by ``max_nodes``). Counting is a ``build_graph``, no layout."""
    from .graph import build_graph

    nodes = {n["id"]: n for n in doc.get("nodes", [])}
    ids = next((g.get("nodes") or [] for g in doc.get("graphs", []) if g["id"] == graph), [])
    deepest = max((len(_module_paths(nodes[i])) for i in ids if i in nodes), default=0)
    for depth in range(deepest, level, -1):
        if depth == deepest:
            spec = build_graph(doc, graphs=[graph], **options)
        else:
            spec = build_graph(doc, graphs=[graph], depth=depth, **options)
        if len(spec.nodes) <= budget:
            return None if depth == deepest else depth
    return max(level + 1, 0)


def _restricted(doc, graph, node_ids):
    """``doc`` with ``graph`` holding only ``node_ids``: the inside of one module box, drawn on its own."""
    keep = set(node_ids)
    graphs = [dict(g, nodes=[n for n in g.get("nodes") or [] if n in keep]) if g["id"] == graph else g
              for g in doc.get("graphs", [])]
    return dict(doc, graphs=graphs)


def _box_paths(spec, modules):
    """{box SVG id: module path} for the collapsed module boxes of a picture."""
    boxes = {}
    for node in spec.nodes:
        match = _BOX_ID.match(node.html_id or "")
        if node.kind != "module" or not match or not node.rows:
            continue
        title = node.rows[0].text
        path = title if title in modules else title.rsplit(" (", 1)[0]
        boxes[node.html_id] = path
    return boxes


class _Drawer:
    def __init__(self, doc, budget, node_budget, options):
        self.doc, self.budget, self.node_budget, self.options = doc, budget, node_budget, options
        self.nodes = {n["id"]: n for n in doc.get("nodes", [])}
        self.bytes = 0
        self.capped = 0  # module views left out by the byte cap
        self.sources = {}  # graph id -> DOT source of its top-level view

    def draw(self, doc, graph, level):
        """(svg, spec) of ``graph`` in ``doc`` at the depth that fits the node budget below ``level``."""
        from .layout import lay_out

        depth = self.options.get("depth")
        options = {k: v for k, v in self.options.items() if k != "depth"}
        if depth is None:
            depth = _depth_for_budget(doc, graph, level, self.node_budget, options)
        spec, source, data = lay_out(doc, "svg", self.budget, graphs=[graph], depth=depth, **options)
        svg = slim(data.decode("utf-8"))
        self.bytes += len(svg)
        if level < 0:
            self.sources[graph] = source
        return svg, spec

    def insides(self, view, doc, spec, level, out):
        """Views of the inside of each module box of ``view`` (depth-first, while the byte cap allows)."""
        ids = set(next((g.get("nodes") or [] for g in doc.get("graphs", []) if g["id"] == view.graph), []))
        for box, path in _box_paths(spec, self.doc.get("modules") or {}).items():
            inside = [i for i in ids if path in _module_paths(self.nodes.get(i, {}))]
            if len(inside) < 2 or level >= MAX_LEVELS:
                continue
            if self.bytes >= SVG_BYTES_CAP:
                self.capped += 1
                continue
            sub = _restricted(doc, view.graph, inside)
            child = View(f"{view.key}-{box[3:]}", view.graph, path, parent=view.key, box=box)
            try:
                child.svg, child_spec = self.draw(sub, view.graph, level + 1)
            except Exception as exc:  # this view only: the page still shows the others
                child.error = str(exc) or type(exc).__name__
                out.append(child)
                view.boxes.append(box)
                continue
            out.append(child)
            view.boxes.append(box)
            self.insides(child, sub, child_spec, level + 1, out)


def _normalized(text, alias):
    """``text`` (DOT or SVG) with one graph's node ids renamed to another's, and the heading's iteration and
    graph number and the clusters' numbers (given in walk order) left out."""
    def rename(match):
        prefix, kind, number = match.group(1) or "", match.group(2), int(match.group(3))
        return f"{prefix}{kind}{alias.get(number, number) if kind == 'n' else number}"
    return _HEADER.sub("", _ID.sub(rename, text))


def _drawn_alike(source, first_source, alias):
    """Two DOT sources with the same statements once ids are mapped (dot may order them differently)."""
    return sorted(_normalized(source, alias).splitlines()) == sorted(_normalized(first_source, {}).splitlines())


def _alias(doc, graph, first):
    """{node id of ``graph``: node id of ``first``}, pairing nodes by op, shape, module path and source line (in
    creation order among equals), or None when that is not one-to-one. ``_drawn_alike`` then checks it."""
    nodes = {n["id"]: n for n in doc.get("nodes", [])}
    graphs = {g["id"]: g for g in doc.get("graphs", [])}

    def keyed(gid):
        seen, out = {}, {}
        for i in sorted(graphs[gid].get("nodes") or []):
            node = nodes.get(i, {})
            key = (node.get("op"), tuple(node.get("shape") or ()), tuple(node.get("module") or ()),
                   (node.get("location") or {}).get("line"))
            seen[key] = seen.get(key, -1) + 1
            out[key + (seen[key],)] = i
        return out

    a, b = keyed(first), keyed(graph)
    return {b[k]: a[k] for k in b} if a.keys() == b.keys() else None


def page_views(doc, budget=4.0, node_budget=NODE_BUDGET, **options):
    """(views, notes): every view of the page, top-level ones first in picture order, insides after their
    parent; ``notes`` says what was left out."""
    from . import to_dot
    from .graph import build_graph
    from .layout import dot_available

    drawer = _Drawer(doc, budget, node_budget, options)
    views, notes, first_of = [], [], {}
    for picture in pictures_to_draw(doc):
        view = View(f"g{picture.graph}", picture.graph, picture.title, structure=picture.structure,
                    iteration=picture.iteration, which=picture.which)
        if not dot_available():
            view.source = to_dot(build_graph(doc, graphs=[picture.graph], **options))
            views.append(view)
            continue
        try:
            view.svg, spec = drawer.draw(doc, picture.graph, -1)
        except Exception as exc:
            view.error = str(exc) or type(exc).__name__
            views.append(view)
            continue
        first = first_of.get(picture.structure)
        alias = _alias(doc, picture.graph, first.graph) if first is not None and first.svg else None
        if alias and _drawn_alike(drawer.sources[picture.graph], drawer.sources[first.graph], alias):
            drawer.bytes -= len(view.svg)
            view.svg, view.same_as, view.alias = None, first.key, alias
            views.append(view)
            continue
        first_of.setdefault(picture.structure, view)
        views.append(view)
        drawer.insides(view, doc, spec, -1, views)
    if drawer.capped:
        notes.append(f"{drawer.capped} module view{'s' * (drawer.capped != 1)} not embedded to keep the page "
                     f"small (their boxes stay closed); `gradviz graph --depth` draws them")
    return views, notes
