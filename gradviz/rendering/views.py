"""What report.html's graph viewer shows: one view per picture (a structure's first and last graph), each drawn
at the module depth that fits a node budget, plus a pre-rendered view behind every element that stands for
several nodes, recursively, within a byte cap: the inside of a collapsed module box, a folded loop unfolded, and
the nodes past ``max_nodes`` (the "… more" box). So every node of a drawn graph is drawn in some view, and search
or a deep link lands on it. Reads the document only; Graphviz lays out each view, several at a time.

Views below the top ones are embedded deflated (``View.packed``, base64): dot's SVG of a module repeats the same
attributes on every element and shrinks about tenfold, so every module of a 5,000-node run opens within 5 MiB.

A structure's last graph is usually drawn exactly like its first (same ops, same shapes, other ids): it is then
embedded once, and the last graph's nodes are mapped onto the first one's (``alias``), so deep links, search and
diagnostics still land on the node that stands for them.
"""

import base64
import re
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from ..document.index import DocIndex
from .graph import READABLE_NODES, choose_depth
from .overview import (
    MAX_OVERVIEW_NODES,
    MIN_TEXT_PX,
    legible,
    module_boxes_possible,
    overview,
    run_dot_each,
    text_px_at_fit,
)
from .pictures import pictures_to_draw

NODE_BUDGET = READABLE_NODES  # nodes per view, as the picture files: readable at one zoom step on a laptop
SVG_BYTES_CAP = 3 * 1024 * 1024  # all views as embedded (top ones as text, the others packed); page <= 5 MiB
MAX_LEVELS = 8  # nested views below a picture
SMALLEST_VIEW = 1024  # bytes of the smallest packed view (two nodes): with less of the cap left, none is laid out
VIEW_ITEMS_PER_BUDGET = 400  # nodes + edges of a part view laid out within the page's budget; more get more time
MAX_VIEW_BUDGET = 30.0  # seconds: the most a part view may take
WORKERS = 4  # views laid out at once: ``dot`` runs as a subprocess, so they overlap
LEAF_KINDS = ("leaf", "const", "ghost")  # spec node kinds of leaves (a ghost: a leaf drawn again at a use)
_ID = re.compile(r"\b(gv(?:-|&#45;))?([nve])(\d+)\b")
_SLIM = re.compile(r'<title>[^<]*</title>\n?| font-family="Helvetica,sans-Serif"')
# what two alike graphs' pictures differ in besides ids: the heading's numbers, clusters numbered in walk order
_HEADER = re.compile(r"iteration \d+ · graph \d+|(?<=cluster_)\d+")


@dataclass
class View:
    key: str  # "g3", or "g3-b2" for what element gv-b2 of view g3 opens
    graph: int
    title: str
    svg: str | None = None  # None: see ``source`` or ``error``
    source: str | None = None  # DOT source when Graphviz is missing
    error: str | None = None
    parent: str | None = None  # the view whose element opens this one
    box: str | None = None  # that element's SVG id in the parent, "gv-b2"
    structure: int | None = None
    iteration: int | None = None
    which: str = ""
    same_as: str | None = None  # key of the view drawn identically (this one is not embedded)
    alias: dict = field(default_factory=dict)  # {node id of this graph: node id drawn in same_as}
    boxes: list = field(default_factory=list)  # element ids of this view that open another view
    packed: str | None = None  # the SVG deflated and base64-encoded (views below the top ones)
    stands: list = field(default_factory=list)  # [(element id, [document node ids it stands for])], 2+ ids
    kind: str = ""  # what opened it: "module", "loop" (unfolded) or "more" (past max_nodes)


@dataclass
class _Opening:
    """An element of a drawn view that stands for several nodes and opens a view of them."""
    elem: str
    title: str
    nodes: list
    kind: str
    options: dict = field(default_factory=dict)


def slim(svg):
    """dot's SVG without what the page does not use: each element's <title> (its DOT name, shown as a tooltip
    over the real one) and the font family repeated on every text (the page's style sets it once)."""
    return _SLIM.sub("", svg)


def pack(svg):
    """``svg`` deflated (zlib format, which the browser's DecompressionStream("deflate") reads) as base64."""
    return base64.b64encode(zlib.compress(svg.encode("utf-8"), 9)).decode("ascii")


def _restricted(doc, graph, node_ids):
    """``doc`` with ``graph`` holding only ``node_ids``: part of a graph, drawn on its own."""
    keep = set(node_ids)
    graphs = [dict(g, nodes=[n for n in g.get("nodes") or [] if n in keep]) if g["id"] == graph else g
              for g in doc.get("graphs", [])]
    return dict(doc, graphs=graphs)


def _openings(spec, graph_nodes):
    """The elements of a drawn picture that open a view of the nodes they stand for: collapsed module boxes,
    folded loops (their dashed "× N" cluster: the loop drawn unfolded) and the "… more" box of ``max_nodes``."""
    out = []
    for node in spec.nodes:
        ids = [n for n in node.doc_nodes if n in graph_nodes]
        if node.kind == "module" and node.rows and len(ids) >= 2:
            out.append(_Opening(node.html_id, node.rows[0].text.rsplit(" (", 1)[0], ids, "module", dict(node.opens)))
        elif node.kind == "more" and ids:
            out.append(_Opening(node.html_id, f"{len(ids):,} more nodes", ids, "more"))
    children = {}
    for cluster in spec.clusters:
        children.setdefault(cluster.parent, []).append(cluster.name)
    members, by_name = {}, {node.name: node for node in spec.nodes}
    for node in spec.nodes:
        members.setdefault(node.cluster, []).append(node)
    for cluster in spec.clusters:
        if not (cluster.rows and cluster.rows[0].text.startswith("× ") and "dashed" in cluster.style):
            continue
        inside, todo = [], [cluster.name]
        while todo:
            name = todo.pop()
            inside += members.get(name, [])
            todo += children.get(name, [])
        # with the leaves the steps read (parameters drawn beside their use): left out, they would all be one
        # "input from elsewhere" box with an edge from every step, which dot lays out very slowly
        names = {node.name for node in inside}
        for edge in spec.edges:
            for mine, other in ((edge.tail, edge.head), (edge.head, edge.tail)):
                if mine in names and by_name.get(other) is not None and by_name[other].kind in LEAF_KINDS:
                    inside.append(by_name[other])
        ids = [n for node in inside for n in node.doc_nodes if n in graph_nodes]
        if len(ids) >= 2:
            out.append(_Opening(cluster.html_id, f"loop {cluster.rows[0].text} unfolded", sorted(set(ids)), "loop",
                                {"fold_loops": False}))
    return out


def _stands(spec):
    """[(element id, node ids)] for the elements standing for more than one node (boxes, folds, "… more")."""
    return [(node.html_id, list(node.doc_nodes)) for node in spec.nodes
            if node.html_id and len(node.doc_nodes) > 1 and node.kind != "ghost"]


class _Drawer:
    def __init__(self, doc, budget, node_budget, options, laid):
        self.doc, self.budget, self.node_budget, self.options = doc, budget, node_budget, options
        self.laid = laid or {}
        self.index = DocIndex(doc)  # shared by every part view: the records are the same, only graphs differ
        self.nodes = self.index.nodes
        self.bytes = 0
        self.capped = 0  # views left out by the byte cap
        self.notes = []  # what the page says under the graph about a view (a depth asked for, not legible)
        self.sources = {}  # graph id -> DOT source of its top-level view

    def top(self, graph):
        """(svg, spec, DOT source) of a picture: as ``gradviz graph`` draws it (its depth fitted to the node
        budget by ``build_graph``), the picture file's layout when ``gradviz run`` has made one (``laid``); or,
        when that is not legible at fit, the overview (``overview.py``). A picture of more nodes than an overview
        holds is not laid out (or converted) for the page at all. A depth the caller asked for is kept, legible or
        not: a note says so instead."""
        from . import raster
        from .dot import to_dot
        from .graph import build_graph
        from .layout import lay_out

        if graph in self.laid:
            spec, source, text, fmt = self.laid[graph]
        else:
            spec = build_graph(self.doc, graphs=[graph], node_budget=self.node_budget, index=self.index,
                               **self.options)
            source, text, fmt = to_dot(spec), None, None
        svg = None
        asked = self.options.get("depth")
        if asked is not None or len(spec.nodes) <= MAX_OVERVIEW_NODES or not module_boxes_possible(spec):
            if text is None:
                spec, source, data = lay_out(self.doc, "svg", self.budget, graphs=[graph],
                                             node_budget=self.node_budget, **self.options)
                svg = data.decode("utf-8")
            else:
                svg = text if fmt == "svg" else raster.draw(text, "svg", self.budget).decode("utf-8")
            if legible(svg):
                return slim(svg), spec, source
            if asked is not None:
                self.notes.append(f"graph {graph} is drawn at depth {asked}, as asked: its text is "
                                  f"{text_px_at_fit(svg):.1f} px at fit, below the {MIN_TEXT_PX} px that reads; zoom "
                                  "in, or ask for a smaller depth")
                return slim(svg), spec, source
        found = overview(self.doc, graph, lambda texts: run_dot_each(texts, self.budget),
                         index=self.index, **{k: v for k, v in self.options.items() if k != "depth"})
        if found is not None:
            spec, source, svg, _ = found
        elif svg is None:  # no overview (no module to box): the picture as it is
            if text is None:
                spec, source, data = lay_out(self.doc, "svg", self.budget, graphs=[graph],
                                             node_budget=self.node_budget, **self.options)
                svg = data.decode("utf-8")
            else:
                svg = text if fmt == "svg" else raster.draw(text, "svg", self.budget).decode("utf-8")
        return slim(svg), spec, source

    def prepare(self, doc, graph, at_least=0, extra=None):
        """(spec, DOT source, options) of part of ``graph`` (``doc`` restricted to it) at the depth that fits the
        node budget, ``at_least`` that; not laid out yet."""
        from .dot import to_dot
        from .graph import build_graph

        options = dict(self.options, **(extra or {}))
        index = self.index.with_graphs_of(doc)
        depth = options.pop("depth", None)
        if depth is None:
            depth = choose_depth(doc, [graph], self.node_budget, forward=options.get("forward", False),
                                 fold_loops=options.get("fold_loops", True), at_least=at_least, open_single=True,
                                 index=index)
        options.update(graphs=[graph], depth=depth)
        spec = build_graph(doc, index=index, **options)
        return spec, to_dot(spec), options

    def lay_out_many(self, items):
        """Each item's [spec, source, options, doc] laid out as SVG: one ``dot`` run for all of them (a small
        view costs dot more to start than to lay out); should that fail or pass the items' time, each on its
        own with ``lay_out``'s cheaper fallbacks. Returns [(spec, svg text) or the exception] in order."""
        from .layout import lay_out, run_dot

        if len(items) > 1:
            try:
                data = run_dot("".join(item[1] + "\n" for item in items), "svg",
                               0.45 * sum(self.budget_for(item[0]) for item in items))
                parts = data.decode("utf-8").split("<?xml")[1:]
                if len(parts) == len(items):
                    return [(item[0], "<?xml" + part) for item, part in zip(items, parts)]
            except Exception:  # then each view is laid out on its own below, where a failure is only its own
                pass
        out = []
        for spec, _, options, doc in items:
            try:
                spec, _, data = lay_out(doc, "svg", self.budget_for(spec), **options)
                out.append((spec, data.decode("utf-8")))
            except Exception as exc:
                out.append(exc)
        return out

    def budget_for(self, spec):
        """The seconds ``dot`` may take on a part view: the page's budget, more for a big one (dot's time grows
        with nodes and edges), at most ``MAX_VIEW_BUDGET``."""
        size = len(spec.nodes) + len(spec.edges)
        return min(MAX_VIEW_BUDGET, max(self.budget, self.budget * size / VIEW_ITEMS_PER_BUDGET))

    def leaves_of(self, node_ids):
        """The AccumulateGrad nodes (parameters, leaves) that ``node_ids`` read and do not hold: a part view draws
        its parameters as leaves, each beside its uses, not as one "input from outside" box with an edge from
        every use (a cell unrolled over 35 steps: 8 such hubs of 35 edges took dot 8 s)."""
        inside, out = set(node_ids), []
        for node in node_ids:
            for source, _ in self.nodes.get(node, {}).get("inputs") or []:
                if source not in inside and self.nodes.get(source, {}).get("op") == "AccumulateGrad":
                    inside.add(source)
                    out.append(source)
        return out

    def floor(self, opening):
        """The least depth to draw a module box's inside at: one below the module's own (its place in its
        nodes' module paths); 0 for a box standing for a module of every step of a folded loop."""
        depths = [(self.nodes.get(n, {}).get("module") or []).index(opening.title) for n in opening.nodes
                  if opening.title in (self.nodes.get(n, {}).get("module") or [])]
        return min(depths) + 1 if depths else 0

    def _prepare(self, job):
        """(child view, its doc, [spec, source, options, doc] or None when building it failed)."""
        view, doc, opening = job
        sub = _restricted(doc, view.graph, opening.nodes + self.leaves_of(opening.nodes))
        child = View(f"{view.key}-{opening.elem[3:]}", view.graph, opening.title, parent=view.key,
                     box=opening.elem, kind=opening.kind)
        floor = self.floor(opening) if opening.kind == "module" else 0
        try:
            spec, source, options = self.prepare(sub, view.graph, floor, opening.options)
        except Exception as exc:  # this view only: the page still shows the others
            child.error = str(exc) or type(exc).__name__
            return child, sub, None
        return child, sub, [spec, source, options, sub]

    def _children(self, pool, jobs):
        """[(child view, its doc, its spec or None)] for ``jobs``: built in ``pool``, laid out in ``WORKERS``
        batches."""
        prepared = list(pool.map(self._prepare, jobs))
        ready = [number for number, (_, _, item) in enumerate(prepared) if item is not None]
        batches = [ready[start::WORKERS] for start in range(WORKERS) if ready[start::WORKERS]]
        specs = {}
        for batch, results in zip(batches, pool.map(lambda b: self.lay_out_many([prepared[n][2] for n in b]),
                                                    batches)):
            for number, result in zip(batch, results):
                child = prepared[number][0]
                if isinstance(result, Exception):
                    child.error = str(result) or type(result).__name__
                    continue
                specs[number], child.svg = result[0], slim(result[1])
                child.packed = pack(child.svg)
                child.stands = _stands(result[0])
        return [(child, sub, specs.get(number)) for number, (child, sub, _) in enumerate(prepared)]

    def below(self, roots, out):
        """The views opened from the elements of ``roots`` ([(view, doc, spec)]), level by level, while the
        byte cap allows; appended to ``out``."""
        level = roots
        for _ in range(MAX_LEVELS):
            jobs = []
            for view, view_doc, view_spec in level:
                nodes = set(next((g.get("nodes") or [] for g in view_doc.get("graphs", [])
                                  if g["id"] == view.graph), []))
                for opening in _openings(view_spec, nodes):
                    if set(opening.nodes) == nodes and opening.kind in ("more", view.kind):
                        continue  # the same view again (a layout that fell back to folding, say): no end to it
                    jobs.append((view, view_doc, opening))
            if not jobs:
                return
            if SVG_BYTES_CAP - self.bytes < SMALLEST_VIEW:  # none of them could be embedded: not drawn at all
                self.capped += len(jobs)
                return
            level = []
            with ThreadPoolExecutor(WORKERS) as pool:
                for job, (child, sub, child_spec) in zip(jobs, self._children(pool, jobs)):
                    view = job[0]
                    cost = len(child.packed or "")
                    if self.bytes + cost > SVG_BYTES_CAP:
                        self.capped += 1
                        continue
                    self.bytes += cost
                    out.append(child)
                    view.boxes.append(child.box)
                    if child_spec is not None:
                        level.append((child, sub, child_spec))


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


def page_views(doc, budget=4.0, node_budget=NODE_BUDGET, laid=None, **options):
    """(views, notes): every view of the page, top-level ones first in picture order, the views they open after
    them; ``notes`` says what was left out. ``laid``: {graph id: (spec, DOT source, text, "svg" or "dot")} of
    pictures already laid out with the same ``options`` (``gradviz run``'s picture files): an SVG is used as it
    is, a layout (``dot -Tdot``, a PNG's) drawn as SVG without laying it out again."""
    from .dot import to_dot
    from .graph import build_graph
    from .layout import dot_available

    drawer = _Drawer(doc, budget, node_budget, options, laid)
    views, notes, first_of, roots = [], [], {}, []
    pictures = pictures_to_draw(doc)
    if dot_available():
        with ThreadPoolExecutor(WORKERS) as pool:
            drawn = list(pool.map(lambda picture: _attempt(drawer.top, picture.graph), pictures))
    for number, picture in enumerate(pictures):
        view = View(f"g{picture.graph}", picture.graph, picture.title, structure=picture.structure,
                    iteration=picture.iteration, which=picture.which)
        views.append(view)
        if not dot_available():
            view.source = to_dot(build_graph(doc, graphs=[picture.graph], **options))
            continue
        result = drawn[number]
        if isinstance(result, Exception):
            view.error = str(result) or type(result).__name__
            continue
        view.svg, spec, drawer.sources[picture.graph] = result
        first = first_of.get(picture.structure)
        alias = _alias(doc, picture.graph, first.graph) if first is not None and first.svg else None
        if alias and _drawn_alike(drawer.sources[picture.graph], drawer.sources[first.graph], alias):
            view.svg, view.same_as, view.alias = None, first.key, alias
            continue
        drawer.bytes += len(view.svg)
        view.stands = _stands(spec)
        first_of.setdefault(picture.structure, view)
        roots.append((view, doc, spec))
    drawer.below(roots, views)
    notes += sorted(drawer.notes)
    if drawer.capped:
        notes.append(f"{drawer.capped} view{'s' * (drawer.capped != 1)} not embedded to keep the page small "
                     f"(their boxes stay closed); `gradviz graph --depth` draws them")
    return views, notes


def _attempt(function, *args):
    """``function(*args)``, or the exception it raised (one view's failure is shown in its place)."""
    try:
        return function(*args)
    except Exception as exc:
        return exc
