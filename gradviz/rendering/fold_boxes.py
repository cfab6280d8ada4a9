"""Repeated module boxes of an overview drawn once, "× N": a stack of identical layers (a transformer's
``layers.0`` … ``layers.3``, a ResNet's 48 blocks) or a loop calling the same modules step after step (an LSTM
language model's two cells unrolled over 35 tokens).

This works on the drawn picture (a ``GraphSpec``), after module boxes are made: the op-level fold
(``collapse.fold_repeats``) needs four identical steps of ops, and a stack whose first layer reads its input
with other ops than the rest (the transformer's) or whose steps differ by a few ops never is one. Boxes compare
by what they are (module path and class), not by their ops.

A box holding a diagnosed node or a root (the loss) is never folded, so what a diagnostic points at, and the way
to the loss, stay in sight; a fold is a module box itself: clicking it opens the boxes it stands for.
"""

import re
from dataclasses import replace

import numpy as np

from .collapse import _longest_periodic_run
from .spec import COLORS, Row

MIN_REPS = 2  # boxes repeated this often or more are folded
_INDEX = re.compile(r"(?<=\.)\d+(?=\.|$)")  # a container's child index in a dotted path: layers.3


def fold_repeated_boxes(spec, pinned=frozenset(), accumulators=frozenset(), passes=8, depth=None):
    """Fold runs of repeated module boxes of ``spec`` in place; returns how many folds were made. ``pinned``:
    document node ids whose box stays as it is (diagnosed nodes, roots). ``accumulators``: the document's
    AccumulateGrad node ids (a parameter each, not an op: not counted as ops). ``depth``: the module depth
    ``spec`` was drawn at: a fold opens onto its boxes at that depth, unfolded."""
    folds = set()  # the names of the folds made: a fold is not folded again
    for _ in range(passes):
        run = _best_run(spec, pinned, folds)
        if run is None:
            break
        fold = _fold(spec, *run, accumulators)
        if depth is not None:  # clicked, it opens unfolded: its boxes one by one
            fold.opens = {"depth": depth, "fold_loops": False}
        folds.add(fold.name)
    return len(folds)


def _title(node):
    return node.rows[0].text if node.rows else node.name


def _path_and_class(node):
    path, _, cls = _title(node).partition(" (")
    return path, cls.rstrip(")")


def _sequence(spec):
    """The nodes a run is made of, in the picture's order: module boxes and ops (leaves hang off them)."""
    return [node for node in spec.nodes if node.kind in ("module", "op")]


def _best_run(spec, pinned, folds):
    """(members, period, reps) of the run of repeated boxes covering the most nodes, or None. Compared twice:
    by exact title (the same modules called again: a loop), then with containers' indices ignored (a stack of
    layers); on a tie the loop wins."""
    seq = _sequence(spec)
    best = None
    for stack_free in (False, True):
        codes, table = [], {}
        for number, node in enumerate(seq):
            held = pinned.intersection(node.doc_nodes)
            if held or node.name in folds:  # unique: no run goes through it
                key = ("pinned", number)
            else:
                title = _title(node)
                if stack_free and node.kind == "module":
                    path, cls = _path_and_class(node)
                    title = (_INDEX.sub("#", path), cls)
                key = (node.kind, title, node.cluster)
            codes.append(table.setdefault(key, len(table)))
        if len(codes) < MIN_REPS:
            continue
        start, period, reps = _longest_periodic_run(np.asarray(codes, dtype=np.int64), codes, MIN_REPS)
        members = seq[start:start + period * reps]
        if reps < MIN_REPS or not any(node.kind == "module" for node in members[:period]):
            continue
        if best is None or period * reps > best[1] * best[2]:
            best = (members, period, reps)
    return best


def _fold_title(members, period, reps):
    """``model.0.layers.0–3 (TransformerEncoderLayer) × 4``, ``model.cells.0 (Cell) × 35`` (one module called
    35 times), ``model.cells.0 → model.cells.1 × 35`` (a step of two)."""
    if period > 1:
        return " → ".join(_path_and_class(node)[0] for node in members[:period]) + f" × {reps}"
    paths = [_path_and_class(node)[0].split(".") for node in members]
    cls = _path_and_class(members[0])[1]
    parts = list(paths[0])
    for position, part in enumerate(parts):
        last = paths[-1][position] if position < len(paths[-1]) else part
        if last != part:
            parts[position] = f"{part}–{last}"
    return ".".join(parts) + (f" ({cls})" if cls else "") + f" × {reps}"


def parameters_of(spec, members, accumulators):
    """The AccumulateGrad node ids (a parameter each) that ``members`` hold or read: a parameter drawn beside
    them (a cell's weights, used at each of its 35 calls, sit in no call's box) is theirs as much as one inside."""
    names = {node.name for node in members}
    by_name = {node.name: node for node in spec.nodes}
    held = {n for node in members for n in node.doc_nodes if n in accumulators}
    for edge in spec.edges:  # (either way: a backward picture's edges point from an op to its inputs)
        for mine, other in ((edge.head, edge.tail), (edge.tail, edge.head)):
            leaf = by_name.get(other) if mine in names and other not in names else None
            if leaf is not None and leaf.kind in ("leaf", "ghost"):
                held.update(n for n in leaf.doc_nodes if n in accumulators)
    return held


def _fold(spec, members, period, reps, accumulators):
    """``members`` become one module box: the fold's title and what it holds. Returns the fold."""
    nodes = list(dict.fromkeys(n for node in members for n in node.doc_nodes))
    ops = sum(1 for n in nodes if n not in accumulators)
    params = len(parameters_of(spec, members, accumulators))
    step = "blocks" if period == 1 else "steps"
    rows = [Row(_fold_title(members, period, reps), bold=True),
            Row(f"{reps} {step} · {ops:,} ops · {params:,} parameters")]
    return merge(spec, members, rows, members[0].cluster)


def merge(spec, members, rows, cluster):
    """Replace ``members`` of ``spec`` by one module box labelled ``rows`` in ``cluster``, standing for every
    node they stand for, where the first of them was; edges between them go, edges to and from them meet at
    the box. The box gets a name of its own (a ``b…`` like the collapsed modules': never a document id, which
    the page would take for the node itself). Returns the box."""
    first = members[0]
    taken = {node.name for node in spec.nodes}
    name = next(f"b{number}" for number in range(len(taken) + 1, 10 * len(taken) + 2) if f"b{number}" not in taken)
    fill, border = COLORS["module"]
    box = replace(first, name=name, rows=rows, kind="module", cluster=cluster, html_id=f"gv-{name}",
                  shape="box3d", fill=fill, border=border, style="filled", penwidth=1.0, peripheries=1,
                  tooltip=rows[0].text, doc_node=None, doc_variable=None, opens={},
                  doc_nodes=list(dict.fromkeys(n for node in members for n in node.doc_nodes)),
                  doc_variables=list(dict.fromkeys(v for node in members for v in node.doc_variables)))
    gone = {node.name for node in members}
    at = spec.nodes.index(first)
    spec.nodes = [node for node in spec.nodes[:at] if node.name not in gone] + [box] + \
        [node for node in spec.nodes[at:] if node.name not in gone]
    seen, edges = set(), []
    for edge in spec.edges:
        edge.tail = name if edge.tail in gone else edge.tail
        edge.head = name if edge.head in gone else edge.head
        key = (edge.tail, edge.head, edge.style, edge.label)
        if edge.tail == edge.head or key in seen:
            continue
        seen.add(key)
        edges.append(edge)
    spec.edges = edges
    return box
