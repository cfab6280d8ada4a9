"""What report.html's graph viewer shows: one view per picture (a structure's first and last graph), each drawn
at the module depth that fits a node budget, plus a view behind every element that stands for
several nodes, recursively, within a byte cap: the inside of a collapsed module box, a folded loop unfolded, and
the nodes past ``max_nodes`` (the "… more" box). So every node of a drawn graph is drawn in some view, and search
or a deep link lands on it. Reads the document only.

Only the top views are laid out here (by ``dot``, or taken from the picture files). The views below them are
embedded as graph data (``view_graph``: nodes, edges, clusters), deflated (``View.packed``, base64), and the page
lays each out when it is first opened (``assets/layout.js``): writing the report costs a build per part view,
no layout.

A structure's last graph is usually drawn exactly like its first (same ops, same shapes, other ids): it is then
embedded once, and the last graph's nodes are mapped onto the first one's (``alias``), so deep links, search and
diagnostics still land on the node that stands for them.

Each node is laid out once below a picture: a folded loop or a "… more" box opens a window of its nodes (the
2 × ``max_nodes`` nearest the root, unfolded) whose own "… more" box holds the rest, so a long chain costs one
small build per window; a loop inside another opens the outer one's view; and the top views' layouts go to the
run's ``dot_session``.
"""

import base64
import contextvars
import re
import zlib
from collections import deque
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
from .view_graph import view_graph_text

NODE_BUDGET = READABLE_NODES  # nodes per view, as the picture files: readable at one zoom step on a laptop
SVG_BYTES_CAP = 3 * 1024 * 1024  # all views as embedded (top ones as text, the others packed); page <= 5 MiB
MAX_LEVELS = 8  # nested views below a picture (a "… more" box's next window does not count: see ``window``)
MORE_WINDOW = 2  # a "… more" box's view is built from this many times max_nodes of its nodes, nearest the root
SMALLEST_VIEW = 1024  # bytes of the smallest packed view (two nodes): with less of the cap left, none is laid out
WORKERS = 4  # top views laid out at once: ``dot`` runs as a subprocess, so they overlap
LEAF_KINDS = ("leaf", "const", "ghost")  # spec node kinds of leaves (a ghost: a leaf drawn again at a use)
_HEADING_NODES = re.compile(r"· ([\d,]+) nodes$")  # a picture's heading ends with its node count
_TOO_LARGE = re.compile(r"too large to draw whole: ([\d,]+) nodes")
_ID = re.compile(r"\b(gv(?:-|&#45;))?([nve])(\d+)\b")
_SLIM = re.compile(r'<title>[^<]*</title>\n?| font-family="Helvetica,sans-Serif"')
# what two alike graphs' pictures differ in besides ids: the heading's numbers, clusters numbered in walk order
_HEADER = re.compile(r"iteration \d+ · graph \d+|(?<=cluster_)\d+")


@dataclass
class View:
    key: str  # "g3", or "g3-b2" for what element gv-b2 of view g3 opens
    graph: int
    title: str
    svg: str | None = None  # None: see ``graph_data`` (a part view), ``source`` or ``error``
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
    packed: str | None = None  # ``graph_data`` deflated and base64-encoded (views below the top ones)
    graph_data: str | None = None  # a part view's graph as JSON (``view_graph``): the page lays it out
    stands: list = field(default_factory=list)  # [(element id, [document node ids it stands for])], 2+ ids
    kind: str = ""  # what opened it: "module", "loop" (unfolded) or "more" (past max_nodes)
    opens: dict = field(default_factory=dict)  # {element id: view key} of elements opening another's view
    tail: list = field(default_factory=list)  # node ids past this view's window: its "… more" box stands for them
    note: str = ""  # what the picture is, said above it (an overview's caption: it has no heading of its own)


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
    """``svg`` deflated (zlib format, which the browser's DecompressionStream("deflate") reads) as base64. zlib's
    default level 6: level 9 took twice the time for 3% fewer bytes (a transformer's part views: 1.7 against
    0.8 ms, 4,388 against 4,521 bytes)."""
    return base64.b64encode(zlib.compress(svg.encode("utf-8"), 6)).decode("ascii")


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


def _count_the_rest(spec, tail, nodes):
    """Make a window's view say what its "… more" box holds in all, the ``tail`` of nodes past the window too:
    its count and ops, and the heading's node counts. Returns the [(old text, new text)] it replaced."""
    from collections import Counter

    from ..document.vocabulary import is_accumulate_grad, op_name

    def count(text, pattern, more):
        return pattern.sub(lambda m: m.group(0).replace(m.group(1), f"{int(m.group(1).replace(',', '')) + more:,}"),
                           text)

    changed = []
    for node in spec.nodes:
        if node.kind != "more":
            continue
        # its nodes, not its items (one item stands for the tail's first node, drawn as outside the view)
        held = list(dict.fromkeys(list(node.doc_nodes) + list(tail)))
        ops = Counter(op_name(nodes.get(n)) for n in held if not is_accumulate_grad(nodes.get(n) or {}))
        texts = [f"… {len(held):,} more nodes"]
        if len(node.rows) > 1 and ops:
            texts.append(", ".join(f"{name} ×{n}" for name, n in ops.most_common(4)))
        for row, text in zip(node.rows, texts):
            changed.append((row.text, text))
            node.tooltip = (node.tooltip or "").replace(row.text, text)
            row.text = text
    past = len(tail)
    changed += [(spec.title, count(spec.title, _HEADING_NODES, past))]
    spec.title = changed[-1][1]
    for number, line in enumerate(spec.subtitle):
        spec.subtitle[number] = count(line, _TOO_LARGE, past)
        changed.append((line, spec.subtitle[number]))
    return [(old, new) for old, new in changed if old != new]


def _outer_loops(openings):
    """{element id: element id} of the folded loops whose nodes all lie in another, larger folded loop of the same
    view (a loop of loops): each to the largest holding it, whose unfolded view draws the inner one too."""
    loops = sorted((o for o in openings if o.kind == "loop"), key=lambda o: -len(o.nodes))
    sets = [set(o.nodes) for o in loops]
    out = {}
    for number, opening in enumerate(loops):
        holder = next((loops[k] for k in range(number) if sets[number] <= sets[k]), None)
        if holder is not None:
            out[opening.elem] = holder.elem
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
            spec, source, text, fmt, unfolded = self.laid[graph]
        else:
            spec = build_graph(self.doc, graphs=[graph], node_budget=self.node_budget, index=self.index,
                               **self.options)
            source, text, fmt, unfolded = to_dot(spec), None, None, None
        svg = None
        asked = self.options.get("depth")
        if asked is not None or len(spec.nodes) <= MAX_OVERVIEW_NODES or not module_boxes_possible(spec):
            if text is None:
                spec, source, data = lay_out(self.doc, "svg", self.budget, graphs=[graph],
                                             node_budget=self.node_budget, **self.options)
                svg = data.decode("utf-8")
            else:
                svg = text if fmt == "svg" else raster.draw(text, "svg", self.budget, source).decode("utf-8")
            if legible(svg):
                return slim(svg), spec, source
            if asked is not None:
                self.notes.append(f"graph {graph} is drawn at depth {asked}, as asked: its text is "
                                  f"{text_px_at_fit(svg):.1f} px at fit, below the {MIN_TEXT_PX} px that reads; zoom "
                                  "in, or ask for a smaller depth")
                return slim(svg), spec, source
        found = overview(self.doc, graph, lambda texts: run_dot_each(texts, self.budget),
                         index=self.index, base=unfolded,
                         **{k: v for k, v in self.options.items() if k != "depth"})
        if found is not None:
            spec, source, svg, _ = found
        elif svg is None:  # no overview (no module to box): the picture as it is
            if text is None:
                spec, source, data = lay_out(self.doc, "svg", self.budget, graphs=[graph],
                                             node_budget=self.node_budget, **self.options)
                svg = data.decode("utf-8")
            else:
                svg = text if fmt == "svg" else raster.draw(text, "svg", self.budget, source).decode("utf-8")
        return slim(svg), spec, source

    def prepare(self, doc, graph, at_least=0, extra=None):
        """The spec of part of ``graph`` (``doc`` restricted to it) at the depth that fits the node budget,
        ``at_least`` that."""
        from .graph import build_graph, working_graph

        options = dict(self.options, **(extra or {}))
        index = self.index.with_graphs_of(doc)
        depth = options.pop("depth", None)
        base = working_graph(doc, options.get("iteration"), [graph], options.get("forward") or
                             options.get("architecture", False), options.get("fold_loops", True), index)
        # (walked once: for the depth and for the picture)
        if depth is None:
            depth = choose_depth(doc, [graph], self.node_budget, forward=options.get("forward", False),
                                 fold_loops=options.get("fold_loops", True), at_least=at_least, open_single=True,
                                 index=index, base=base)
        options.update(graphs=[graph], depth=depth)
        return build_graph(doc, index=index, base=base, base_kept=False, **options)

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
        stacks = [self.nodes.get(n, {}).get("module") or [] for n in opening.nodes]  # (each read once)
        depths = [stack.index(opening.title) for stack in stacks if opening.title in stack]
        return min(depths) + 1 if depths else 0

    def _prepare(self, job):
        """(child view, its doc, its spec or None when building it failed)."""
        view, doc, opening = job
        child = View(f"{view.key}-{opening.elem[3:]}", view.graph, opening.title, parent=view.key,
                     box=opening.elem, kind=opening.kind)
        floor = self.floor(opening) if opening.kind == "module" else 0
        nodes, extra = opening.nodes, opening.options
        if opening.kind in ("more", "loop"):  # unfolded, a window at a time: its "… more" box holds the rest
            (nodes, child.tail), extra = self.window(opening.nodes), dict(extra, fold_loops=False)
        sub = _restricted(self.doc, view.graph, nodes + self.leaves_of(nodes))
        try:
            spec = self.prepare(sub, view.graph, floor, extra)
            if child.tail and not any(node.kind == "more" for node in spec.nodes):
                # the window fit whole (its modules collapsed, say): no box to hold the rest, so all of it here
                nodes, child.tail = opening.nodes, []
                sub = _restricted(self.doc, view.graph, nodes + self.leaves_of(nodes))
                spec = self.prepare(sub, view.graph, floor, extra)
            if child.tail:
                _count_the_rest(spec, child.tail, self.nodes)
        except Exception as exc:  # this view only: the page still shows the others
            child.error = str(exc) or type(exc).__name__
            return child, sub, None
        return child, sub, spec

    def window(self, node_ids):
        """(window, rest) of the nodes a "… more" box stands for, nearest the root first (as ``max_nodes``
        keeps them): its view is built from the window alone, not from all the rest, so a 10,000-op chain costs
        a build of ``MORE_WINDOW`` × max_nodes nodes per view instead of one of every node left, per view."""
        size = MORE_WINDOW * self.options.get("max_nodes", 500)
        if len(node_ids) <= size:
            return list(node_ids), []
        ordered = self.nearest_root_first(node_ids)
        return ordered[:size], ordered[size:]

    def nearest_root_first(self, node_ids):
        """``node_ids`` in breadth-first order from those no other of them consumes, along their inputs."""
        inside = set(node_ids)
        inputs = {n: [s for s, _ in self.nodes.get(n, {}).get("inputs") or [] if s in inside] for n in node_ids}
        consumed = {s for sources in inputs.values() for s in sources}
        roots = sorted((n for n in node_ids if n not in consumed), reverse=True)  # the latest made first
        order, seen, queue = [], set(roots), deque(roots)
        while queue:
            node = queue.popleft()
            order.append(node)
            for source in sorted(inputs[node], reverse=True):
                if source not in seen:
                    seen.add(source)
                    queue.append(source)
        return order + [n for n in sorted(inside - seen, reverse=True)]

    def _children(self, jobs):
        """[(child view, its doc, its spec or None)] for ``jobs``: each child carries its graph data
        (``view_graph``) for the page to lay out when it is opened, not a layout (nothing runs ``dot``)."""
        out = []
        for child, sub, spec in map(self._prepare, jobs):
            if spec is not None:
                child.graph_data = view_graph_text(spec)
                child.packed, child.stands = pack(child.graph_data), _stands(spec)
            out.append((child, sub, spec))
        return out

    def below(self, roots, out):
        """The views opened from the elements of ``roots`` ([(view, doc, spec)]), level by level, while the
        byte cap allows; appended to ``out``."""
        level, levels = roots, 0
        while levels < MAX_LEVELS:
            jobs = []
            for view, view_doc, view_spec in level:
                nodes = set(next((g.get("nodes") or [] for g in view_doc.get("graphs", [])
                                  if g["id"] == view.graph), []))
                openings = _openings(view_spec, nodes)
                outer = _outer_loops(openings)
                for opening in openings:
                    if set(opening.nodes) == nodes and opening.kind in ("more", view.kind):
                        continue  # the same view again (a layout that fell back to folding, say): no end to it
                    if opening.elem in outer:  # a loop inside a loop: the outer one unfolded draws it all
                        view.opens[opening.elem] = f"{view.key}-{outer[opening.elem][3:]}"
                        continue
                    if opening.kind == "more" and view.tail:  # what is past this view's window too
                        opening.nodes = opening.nodes + view.tail
                        opening.title = f"{len(opening.nodes):,} more nodes"
                    jobs.append((view, view_doc, opening))
            if not jobs:
                return
            # a "… more" view's next window is the same level read on: each window draws nodes no view drew
            # before, so the chain ends, and every node of a long chain is drawn
            levels += not all(view.tail for view, _, _ in jobs)
            if SVG_BYTES_CAP - self.bytes < SMALLEST_VIEW:  # none of them could be embedded: not drawn at all
                self.capped += len(jobs)
                return
            level = []
            for job, (child, sub, child_spec) in zip(jobs, self._children(jobs)):
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
            for view, _, _ in jobs:  # an inner loop opens its outer loop's view, when that one is embedded
                for elem, key in list(view.opens.items()):
                    if elem not in view.boxes and key.removeprefix(view.key + "-") in \
                            [box[3:] for box in view.boxes]:
                        view.boxes.append(elem)
                    elif elem not in view.boxes:
                        del view.opens[elem]


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
    """(views, notes): every view of the page (see ``_page_views``), laid out by ``dot`` processes started once
    for all of them (``dot_session``)."""
    from .dot_session import session

    with session():
        return _page_views(doc, budget, node_budget, laid, **options)


def _page_views(doc, budget=4.0, node_budget=NODE_BUDGET, laid=None, **options):
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
    if dot_available() and len(pictures) == 1:  # (a pool's threads cost more than they save for one)
        drawn = [_attempt(drawer.top, pictures[0].graph)]
    elif dot_available():
        with ThreadPoolExecutor(WORKERS) as pool:
            drawn = _map(pool, lambda picture: _attempt(drawer.top, picture.graph), pictures)
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
        view.note = spec.caption
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


def _map(pool, function, items):
    """``[function(item) for item in items]`` run in ``pool``, each call in a copy of this thread's context (the
    running ``dot_session``)."""
    futures = [pool.submit(contextvars.copy_context().run, function, item) for item in items]
    return [future.result() for future in futures]


def _attempt(function, *args):
    """``function(*args)``, or the exception it raised (one view's failure is shown in its place)."""
    try:
        return function(*args)
    except Exception as exc:
        return exc
