"""The first view report.html shows of a big graph: the model at the deepest module depth whose picture fits the
page's graph stage with its text legible at "fit" (module boxes with their op counts, repeated blocks folded
"× N", the ops outside modules such as the loss drawn as ops). A module box opens its inside (``views``).

A picture is kept as it is when it already fits; otherwise each depth from 0 down is drawn compactly (a box
says its module and counts; no heading in the picture: the page says what it is beside it; ranks close together;
repeated boxes folded, ``fold_boxes.py``), its size at fit estimated top to bottom and left to right
(``estimate.py``, no layout), and only the deepest that fits is laid out, once. An overview that would be one
module box (all a click away) is drawn one level deeper instead, legible or not. Reads the document only.
"""

import re

from . import collapse
from .dot import to_dot
from .estimate import drawn_size
from .fold_boxes import fold_repeated_boxes, merge, parameters_of
from .graph import build_graph, working_graph
from .spec import Row

STAGE_PX = (900, 420)  # the page's graph stage at a 1280x800 window (report.css: the viewer beside the inspector)
MIN_TEXT_PX = 10  # node titles on screen at fit at least this
TITLE_PT = 11  # the font size dot draws node titles at (style.py): one SVG unit per point
RANKDIRS = ("BT", "LR")  # the overview is measured both ways; the one whose text reads larger at fit is drawn
# inches between ranks in an overview (0.35 elsewhere): a column of 9 boxes then reads at 10 px (lines of text
# 1.2 times their size high, as dot measures them: ``dot_text.py``)
RANKSEP = "0.15"
NODE_HEIGHT = 0.3  # inches, the least height of an overview's node (dot's 0.5 leaves a one-line op half empty)
MAX_OVERVIEW_NODES = 40  # a depth drawing more nodes than this never fits the stage legibly: not laid out
_OPS = re.compile(r"([\d,]+) ops\b")
_SIZE = re.compile(r'<svg width="([\d.]+)pt" height="([\d.]+)pt"')


def text_px_at_fit(svg, stage=STAGE_PX):
    """The on-screen size of node titles once ``svg`` is scaled to fit ``stage`` (as the page's "fit" does)."""
    match = _SIZE.search(svg)
    if not match:
        return 0.0
    width, height = float(match.group(1)), float(match.group(2))
    return TITLE_PT * min(stage[0] / max(width, 1.0), stage[1] / max(height, 1.0))


def legible(svg):
    return text_px_at_fit(svg) >= MIN_TEXT_PX


def estimated_px_at_fit(spec, stage=STAGE_PX):
    """``text_px_at_fit`` of ``spec`` once laid out, estimated from the spec alone (``estimate.drawn_size``)."""
    width, height = drawn_size(spec)
    return TITLE_PT * min(stage[0] / max(width, 1.0), stage[1] / max(height, 1.0))


def compact(spec, depth, accumulators=frozenset(), pinned=frozenset(), fold=True):
    """``spec`` drawn small: each module box keeps its name and its counts (ops, parameters), repeated boxes
    folded "× N" (but those holding a ``pinned`` node: diagnosed nodes, roots), every line of a node at the
    title's size, the heading only its title and what the overview is. ``accumulators``: the ids of the
    document's AccumulateGrad nodes (a parameter each, not an op). ``fold``: False draws every box."""
    _box_plain_clusters(spec, pinned, accumulators)
    folds = fold_repeated_boxes(spec, pinned, accumulators, depth=depth) if fold else 0
    for node in spec.nodes:
        for row in node.rows:  # every line at the title's size: the whole overview is read at fit
            row.size = None
        node.fontsize = TITLE_PT
        if node.kind != "module":
            continue
        node.rows = node.rows[:2]
        counted = _OPS.match(node.rows[1].text) if len(node.rows) > 1 else None  # (a fold's says its blocks)
        ops = len([n for n in node.doc_nodes if n not in accumulators])
        if counted and ops > int(counted.group(1).replace(",", "")):
            # a folded loop inside counts one step: the box stands for every step's ops and parameters
            params = len(parameters_of(spec, [node], accumulators))
            node.rows[1].text = f"{ops:,} ops · {params:,} parameters · repeated blocks folded"
    _absorb_leaves(spec, accumulators)
    spec.caption = (f"overview: modules below depth {depth} as boxes"
                    + (", repeated ones folded × N" if folds else "") + "; click a box to open it")
    spec.title, spec.subtitle, spec.legend = "", [], []  # the page shows the caption above the stage
    spec.layout["ranksep"], spec.node_height = RANKSEP, NODE_HEIGHT
    return spec


def _box_plain_clusters(spec, pinned, accumulators):
    """A module drawn as a cluster of ops only (a Linear one level too deep: its transpose, matmul and views)
    becomes a box again, as at the depth above: the overview shows modules, and a Linear's ops beside the boxes
    of whole layers only make the picture taller. Not one holding a ``pinned`` node (a diagnosed op, the
    loss): that stays drawn."""
    parents = {cluster.parent for cluster in spec.clusters}
    for cluster in list(spec.clusters):
        members = [node for node in spec.nodes if node.cluster == cluster.name]
        if cluster.name in parents or len(members) < 2 or not cluster.rows or \
                any(node.kind in ("module", "more", "note") or pinned.intersection(node.doc_nodes) for node in members):
            continue
        ops = sum(1 for node in members for n in node.doc_nodes if n not in accumulators)
        params = len(parameters_of(spec, members, accumulators))
        rows = [Row(cluster.rows[0].text, bold=True), Row(f"{ops:,} ops · {params:,} parameters")]
        merge(spec, members, rows, cluster.parent)
        spec.clusters = [c for c in spec.clusters if c.name != cluster.name]


def _absorb_leaves(spec, accumulators=frozenset()):
    """Leaves read by module boxes only (a cell's parameters, used at each of its 35 calls) are left out of the
    overview: drawn, each is a hub of long edges across the picture. The boxes count the parameters they read
    already (``parameters_of``); a box reading other leaves says how many more."""
    by_name = {node.name: node for node in spec.nodes}
    neighbours = {}
    for edge in spec.edges:
        neighbours.setdefault(edge.tail, set()).add(edge.head)
        neighbours.setdefault(edge.head, set()).add(edge.tail)
    gone, read = set(), {}
    for node in spec.nodes:
        near = [by_name.get(name) for name in neighbours.get(node.name, ())]
        if node.kind in ("leaf", "ghost") and near and all(n is not None and n.kind == "module" for n in near):
            gone.add(node.name)
            if accumulators.intersection(node.doc_nodes):
                continue  # a parameter: its boxes count it
            for box in near:
                read.setdefault(box.name, set()).add(node.doc_variable if node.doc_variable is not None
                                                     else node.name)
    if not gone:
        return
    spec.nodes = [node for node in spec.nodes if node.name not in gone]
    spec.edges = [edge for edge in spec.edges if edge.tail not in gone and edge.head not in gone]
    for node in spec.nodes:
        if node.name in read and len(node.rows) > 1:
            node.rows[1].text += f" · reads {len(read[node.name])} more"


def module_boxes_possible(spec):
    """Whether a picture has modules an overview could draw as boxes (clusters, or boxes already)."""
    return bool(spec.clusters) or any(node.kind == "module" for node in spec.nodes)


def run_dot_each(sources, budget):
    """The SVG text of each DOT source, laid out by one ``dot`` run (a small graph costs dot more to start than
    to lay out); one run each when that fails (Graphviz 2.42 can crash on some graphs after the first)."""
    from .layout import LayoutTimeout, run_dot

    try:
        parts = run_dot("".join(sources), "svg", budget).decode("utf-8").split("<?xml")[1:]
        if len(parts) == len(sources):
            return ["<?xml" + part for part in parts]
    except LayoutTimeout:
        raise
    except RuntimeError:  # dot failed on the batch: each on its own below, where a failure is its own
        pass
    return [run_dot(source, "svg", budget).decode("utf-8") for source in sources]


def pinned_nodes(doc, graph):
    """The nodes of ``graph`` an overview must keep in sight, never folded away: the diagnosed ones and the roots
    (the loss)."""
    record = next((g for g in doc.get("graphs", []) if g["id"] == graph), {})
    mine = set(record.get("nodes") or [])
    diagnosed = {n for d in doc.get("diagnostics", []) for n in d.get("nodes") or [] if n in mine}
    return frozenset(diagnosed | set(record.get("roots") or []))


def one_box(spec):
    """Whether the picture's modules are all one box: an overview of it says nothing a click would not."""
    return sum(1 for node in spec.nodes if node.kind == "module") == 1


def overview(doc, graph, run, index=None, base=None, **options):
    """(spec, DOT source, svg text, depth) of the deepest depth of ``graph`` whose picture is legible at fit, or
    of depth 0 (the most compact) when none is; one level deeper when that is a single module box (legible or
    not); None when the graph has no module to draw as a box. Depths and directions are compared by their
    estimated size (``estimated_px_at_fit``); only the one chosen is laid out, and should dot draw it smaller
    than estimated, illegible, the next depth up is laid out instead. ``run(sources)``: the SVG text of each
    DOT source (the page's ``dot`` with its budget)."""
    accumulators = {n["id"] for n in doc.get("nodes", []) if n.get("op") == "AccumulateGrad"}
    pinned = pinned_nodes(doc, graph)
    # repeats are folded here as boxes, where a diagnosed block or the loss can be kept out of the fold; the
    # op-level fold (``collapse.fold_repeats``) would fold them in with the rest
    fold = options.pop("fold_loops", True)
    drawn, last_size = [], None  # [(estimated px, spec, depth)], shallowest first
    if base is None:  # (``base``: the caller's walk of the same graph, unfolded; read, not changed)
        base = working_graph(doc, None, [graph], options.get("forward") or options.get("architecture", False),
                             False, index)  # one walk, every depth
    # below its deepest module no depth collapses anything (but the architecture view's boxes): the build would
    # be the last one again, which ends the walk, so it is not made
    deepest = 64 if options.get("architecture") else collapse.module_depth(base[3])
    for depth in range(0, 64):
        if depth > deepest:
            break  # no deeper module level: the last depth drawn is the deepest
        spec = build_graph(doc, graphs=[graph], depth=depth, index=index, fold_loops=False, base=base, **options)
        if depth == 0 and not module_boxes_possible(spec):
            return None
        if len(spec.nodes) == last_size:
            break  # no deeper module level: the last depth drawn is the deepest
        last_size = len(spec.nodes)
        if depth and any(node.kind == "more" for node in spec.nodes):
            break  # past ``max_nodes``: drawn as boxes again, with some left out, so no deeper than the last
        spec = compact(spec, depth, accumulators, pinned, fold)
        if len(spec.nodes) > MAX_OVERVIEW_NODES:
            break  # too many to read, even folded
        px, spec.rankdir = max((_estimated(spec, rankdir), rankdir) for rankdir in RANKDIRS)
        drawn.append((px, spec, depth))
        if px < MIN_TEXT_PX:
            break
    if not drawn:
        return None
    legible_at = [number for number, item in enumerate(drawn) if item[0] >= MIN_TEXT_PX]
    number = legible_at[-1] if legible_at else 0
    if one_box(drawn[number][1]) and number + 1 < len(drawn):
        number += 1  # one box says nothing a click would not: one level deeper
    while True:
        _, spec, depth = drawn[number]
        source = to_dot(spec)
        (svg,) = run([source])
        if legible(svg) or number == 0 or number not in legible_at or one_box(drawn[number - 1][1]):
            return spec, source, svg, depth
        number -= 1  # the estimate was too kind: the depth above, which is smaller


def _estimated(spec, rankdir):
    spec.rankdir = rankdir
    return estimated_px_at_fit(spec)
