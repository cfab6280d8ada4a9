"""Make big graphs drawable: fold unrolled loops, collapse deep modules, cap the node count, ghost shared leaves.

Layout time in ``dot`` grows with long edges from high-degree nodes far more than with node count, so each step
here removes either nodes or long edges, and says what it did in ``ir.notes``.
"""

import functools
import math
import operator
from collections import Counter, deque

import numpy as np

from .ir import Item

LEAF_KINDS = ("leaf", "const", "cut")
_ORDER = operator.attrgetter("order")


def _module_keys(item):
    return [key for key in item.calls if key[:2] == "m:"]  # (a slice, not a method call per key: read very often)


def _path(call_key):
    return call_key[2:].split("@", 1)[0].rsplit("#", 1)[0]


# -- unrolled loops -------------------------------------------------------------------------------------------
def _signatures(ir, ops, pos, module_classes=None):
    """Per op: a code for (op, shape, module paths, where its inputs come from), and one without the inputs. The
    index of a container's child counts as the same everywhere (``layers.0`` and ``layers.1`` of a stack of
    identical layers are one step repeated), and so do the parameters under it."""
    producers = ir.producers()
    same = _repeat_free(module_classes or {})
    table, codes, loose, paths = {}, [], [], {}
    for item in ops:
        ins = []
        for edge in producers[item.key]:
            other = ir.items[edge.src]
            if other.key in pos:
                ins.append(("op", pos[item.key] - pos[other.key]))
            elif "parameter" in other.flags:
                ins.append(("param", same(other.title) if same else other.key))
            else:
                ins.append((other.kind, other.shape))
        calls = tuple(item.calls)
        modules = paths.get(calls)
        if modules is None:  # (once per distinct call stack: most ops share their neighbours')
            modules = paths[calls] = tuple(same(_path(k)) if same else _path(k) for k in _module_keys(item))
        base = (item.title, item.shape, modules)
        codes.append(table.setdefault(base + (tuple(ins),), len(table)))
        loose.append(table.setdefault(base, len(table)))
    return np.asarray(codes, dtype=np.int64), loose


def _repeat_free(module_classes):
    """A function writing ``#`` for each index of a module container in a dotted path (``layers.0`` ->
    ``layers.#``: a ``ModuleList`` or ``Sequential`` child; the container itself is never called, so it is told
    by a numeric name under a module that was), or None when no module path has one."""
    if not any(part.isdigit() for path in module_classes for part in path.split(".")[1:]):
        return None

    @functools.cache  # (a graph's ops name a few module paths, each thousands of times)
    def same(path):
        parts = (path or "").split(".")
        return ".".join(["#" if i and part.isdigit() else part for i, part in enumerate(parts)])

    return same


def _longest_periodic_run(codes, loose, min_reps, max_period=512):
    """(start, period, reps) of the stretch covering the most ops with a repeating pattern.

    Every step must match the step before it exactly, except the first, whose inputs may differ (a loop's
    first step reads the initial state instead of the previous step's output).
    """
    best = (0, 0, 0)
    n = len(codes)
    # ``min_reps`` steps put a code at least ``min_reps`` times (the first step's inputs may differ, but the
    # equal run then starts at the second, and its ops recur in every later step): none that often, no loop
    if n == 0 or np.bincount(codes).max() < min_reps:
        return best
    for period in range(1, min(n // min_reps, max_period) + 1):
        equal = np.concatenate(([0], (codes[period:] == codes[:-period]).astype(np.int8), [0]))
        changes = np.flatnonzero(np.diff(equal))
        if not len(changes):
            continue
        starts, ends = changes[0::2], changes[1::2]
        longest = int(np.argmax(ends - starts))
        start, length = int(starts[longest]), int(ends[longest] - starts[longest])
        shift = 0
        while shift < period - 1 and start - shift - 1 >= 0 and \
                loose[start - shift - 1] == loose[start - shift - 1 + period]:
            shift += 1
        reps = (length + period + shift) // period
        if reps >= min_reps and reps * period > best[1] * best[2]:
            best = (start - shift, period, reps)
    return best


def fold_repeats(ir, min_reps=4, min_nodes=16, passes=8, module_classes=None):
    """Show an unrolled loop once, in a cluster labelled "× reps", with its recurrence as a loop edge; a stack of
    identical layers in a container (``module_classes``: the document's path -> class table) is such a loop
    too."""
    for index in range(passes):
        ops = sorted([item for item in ir.items.values() if item.kind == "op"], key=_ORDER)
        if len(ops) < min_nodes:
            return
        pos = {item.key: i for i, item in enumerate(ops)}
        codes, loose = _signatures(ir, ops, pos, module_classes)
        start, period, reps = _longest_periodic_run(codes, loose, min_reps)
        if reps * period < min_nodes:
            return
        _fold(ir, ops, pos, start, period, reps, f"r:{index}")


def _fold(ir, ops, pos, start, period, reps, cluster_key):
    span = ops[start:start + reps * period]
    kept = span[:period]
    removed = {item.key for item in span[period:]}
    mapping = {item.key: kept[i % period].key for i, item in enumerate(span) if i >= period}
    producers, consumers = ir.producers(), ir.consumers()
    # Leaves used only inside the folded steps (x[t] per step) fold onto the kept step's leaf.
    for i, item in enumerate(span[period:], start=period):
        twin_inputs = [ir.items[e.src] for e in producers[kept[i % period].key]]
        for slot, edge in enumerate(producers[item.key]):
            leaf = ir.items[edge.src]
            if leaf.kind not in LEAF_KINDS or slot >= len(twin_inputs) or leaf.key in mapping:
                continue
            twin = twin_inputs[slot]
            if twin.kind in LEAF_KINDS and twin.key != leaf.key and \
                    all(c.dst in removed for c in consumers[leaf.key]):
                mapping[leaf.key] = twin.key
                twin.flags.add("varies")
                # the drawn leaf stands for every step's leaf: each is listed when it is inspected
                twin.variables += [v for v in leaf.variables if v not in twin.variables]
                twin.nodes += [n for n in leaf.nodes if n not in twin.nodes]
    loops = set()
    for edge in ir.edges:
        if edge.src in pos and edge.dst in pos and start <= pos[edge.src] and \
                pos[edge.dst] < start + reps * period and pos[edge.dst] >= start + period:
            src = kept[(pos[edge.src] - start) % period].key
            dst = kept[(pos[edge.dst] - start) % period].key
            if (pos[edge.src] - start) % period >= (pos[edge.dst] - start) % period:
                loops.add((src, dst))
    # a kept op stands for its twins of every step: search and the page's unfolded view find them through it
    for removed_key, kept_key in mapping.items():
        removed_item, kept_item = ir.items.get(removed_key), ir.items.get(kept_key)
        if removed_item is not None and kept_item is not None and removed_item.kind == "op":
            kept_item.nodes += [n for n in removed_item.nodes if n not in kept_item.nodes]
    ir.remap(mapping, frozenset(loops))
    # the calls every step runs in (the whole span's, not the kept step's: the kept step's block call is one of
    # the blocks the fold stands for, and the fold goes around all of them)
    shared = _common_prefix([item.calls for item in span])
    kept_keys = {item.key for item in kept}
    consumers = ir.consumers()
    for item in list(ir.items.values()):
        # a leaf that only the kept step uses (its parameters) goes into the fold with it
        if item.kind in LEAF_KINDS and item.calls[:len(shared)] == shared and len(item.calls) > len(shared) and \
                consumers[item.key] and all(e.dst in kept_keys for e in consumers[item.key]):
            kept.append(item)
    for item in kept:
        # A step need not start where a module call starts, so a call can be part inside the fold and part
        # outside: its inside part is a cluster of its own under the fold's (one key for both would hang the
        # call's cluster under one parent or the other, and the fold's cluster could vanish from the picture).
        inner = [f"{key}@{cluster_key}" for key in item.calls[len(shared):]]
        for key, renamed in zip(item.calls[len(shared):], inner):
            if key in ir.clusters:
                ir.clusters.setdefault(renamed, ir.clusters[key])
        item.calls = shared + [cluster_key] + inner
        if item.kind == "op":
            item.flags.add("folded")
    names = " → ".join(item.title for item in kept[:min(period, 4)]) + (" → …" if period > 4 else "")
    ir.clusters[cluster_key] = ("repeat", [f"× {reps}", f"{names} ({period} ops per step)"])
    ir.notes.append(f"a loop of {reps} steps × {period} ops is drawn once")


def _common_prefix(paths):
    prefix = list(paths[0]) if paths else []
    for path in paths[1:]:
        n = 0
        while n < len(prefix) and n < len(path) and prefix[n] == path[n]:
            n += 1
        prefix = prefix[:n]
    return prefix


# -- module depth ---------------------------------------------------------------------------------------------
def module_depth(ir):
    deepest = 0
    for item in ir.items.values():
        if len(item.calls) > deepest:  # (its module keys are among its calls: only then can it be deeper)
            deepest = max(deepest, len(_module_keys(item)))
    return deepest


def _box_of(ir, depth, modules=False):
    """A function giving the module call an item collapses into at ``depth``, or None: its module call at
    index ``depth``; with ``modules`` also the innermost call when it has no call inside it (a Linear, a Conv2d:
    the architecture view draws every such module as one box, the ops between modules as ops)."""
    parents = {key for item in ir.items.values() for key in _module_keys(item)[:-1]} if modules else set()

    def box(item):
        if not modules and len(item.calls) <= depth:  # (no module key at ``depth``: none to build)
            return None
        keys = _module_keys(item)
        if len(keys) > depth:
            return keys[depth]
        return keys[-1] if modules and keys and keys[-1] not in parents else None

    return box


def size_at_depth(ir, depth, modules=False):
    """How many nodes the picture has once collapsed at ``depth`` (``modules``: as the architecture view)."""
    box_of, boxes, kept = _box_of(ir, depth, modules), set(), 0
    for item in ir.items.values():
        box = box_of(item)
        if box is not None:
            boxes.add(box)
        elif "ghost" not in item.flags:
            kept += 1
    return kept + len(boxes)


def depth_for_budget(ir, node_budget, modules=False):
    """The deepest module depth whose collapsed picture has at most ``node_budget`` nodes (0 when none does;
    ``module_depth(ir)`` when the whole picture fits)."""
    if modules:
        for depth in range(module_depth(ir), -1, -1):
            if size_at_depth(ir, depth, modules) <= node_budget:
                return depth
        return 0
    # ``size_at_depth`` at each depth from one reading of each item's module keys, not one per depth: a page
    # chooses a depth for every view, and the keys were most of that
    keyed, deepest = [], 0
    for item in ir.items.values():
        keys = _module_keys(item)
        keyed.append((keys, "ghost" in item.flags))
        deepest = len(keys) if len(keys) > deepest else deepest
    for depth in range(deepest, -1, -1):
        boxes, kept = set(), 0
        for keys, ghost in keyed:
            if len(keys) > depth:
                boxes.add(keys[depth])
            elif not ghost:
                kept += 1
        if kept + len(boxes) <= node_budget:
            return depth
    return 0


def one_box(ir, depth):
    """Whether every op of ``ir`` is in one and the same module box at ``depth``."""
    box_of = _box_of(ir, depth)
    boxes = {box_of(item) for item in ir.items.values() if item.kind == "op"}
    return len(boxes) == 1 and None not in boxes


def collapse_depth(ir, depth, module_classes, shape_text, modules=False, copy=False):
    """Replace every module call deeper than ``depth`` by one box: its path, class, ops, parameters, in/out
    shapes. ``modules``: every module with no module inside it too (the architecture view). Returns the collapsed
    graph: ``ir`` itself, or with ``copy`` a copy, ``ir`` left as it is; the items that go into boxes are read, not
    copied (a picture's overview collapses one working graph at every depth, most of it into boxes)."""
    members = _members(ir, depth, modules)
    if not members:
        return ir.copy() if copy else ir
    out = ir.copy(leave_out={item.key for items in members.values() for item in items}, edges=False) if copy else ir
    _into_boxes(ir, out, members, depth, module_classes, shape_text, modules)
    return out


def _members(ir, depth, modules):
    """{module call key: [the items of ``ir`` collapsed into its box at ``depth``]}."""
    box_of = _box_of(ir, depth, modules)
    members = {}
    for item in ir.items.values():
        box = box_of(item)
        if box is not None:
            members.setdefault(box, []).append(item)
    return members


def _into_boxes(ir, out, members, depth, module_classes, shape_text, modules):
    """Put ``members``' boxes into ``out`` (``ir`` itself, or its copy without them) in their items' place: read
    from ``ir``, its edges remapped into ``out``'s."""
    mapping, ordered = {}, sorted(members.items(), key=lambda kv: kv[1][0].order)
    box_at = {item.key: number for number, (_, items) in enumerate(ordered) for item in items}
    # each box's edges in and out, in edge order, from one pass over the edges (not one per box)
    ins, outs, reads = ([[] for _ in ordered] for _ in range(3))
    for e in ir.edges:
        src_box, dst_box = box_at.get(e.src), box_at.get(e.dst)
        if src_box == dst_box:
            continue
        if dst_box is not None:
            ins[dst_box].append(ir.items[e.src].shape)
            reads[dst_box].append(e.src)
        if src_box is not None:
            outs[src_box].append(ir.items[e.src].shape)
    for number, (call_key, items) in enumerate(ordered):
        box_key = f"b{number}"
        for item in items:
            mapping[item.key] = box_key
        box_ins, box_outs = ins[number], outs[number]
        # its parameters: those inside, and those it reads from outside (a weight tied to another module's, as
        # GPT-2's lm_head reads wte's; a cell's weights, used by each of its calls and so in none of them)
        read = set(reads[number])
        params = list({tuple(item.nodes) or item.key: item for item in items + [ir.items[k] for k in sorted(read)]
                       if "parameter" in item.flags}.values())
        ops = [item for item in items if item.kind != "leaf"]
        path = _path(call_key)
        cls = module_classes.get(path)
        title = path
        if "@" in call_key:  # inside a fold: the box stands for the module of every step (layers.#.conv1)
            title = ".".join("#" if i and part.isdigit() else part for i, part in enumerate(path.split(".")))
        values = sum(math.prod(item.shape or ()) for item in params)
        lines = [f"{len(ops)} ops · {len(params)} parameters ({values:,} values)"]
        if box_ins:
            lines.append("in " + ", ".join(dict.fromkeys(shape_text(s) for s in box_ins)))
        if box_outs:
            lines.append("out " + ", ".join(dict.fromkeys(shape_text(s) for s in box_outs)))
        first = min(items, key=_ORDER)
        box = Item(box_key, "module", first.order, title + (f" ({cls})" if cls else ""), lines,
                   shape=box_outs[0] if box_outs else None, calls=first.calls[:first.calls.index(call_key)],
                   nodes=[n for item in items for n in item.nodes],
                   variables=[v for item in items for v in item.variables], params=values)
        box.flags.update(flag for item in items for flag in item.flags if flag == "root")
        out.add(box)
    if out is not ir:
        out.edges = ir.edges  # (``remap`` makes new edges: these are not changed)
    out.remap(mapping)
    if not modules:
        out.notes.append(f"modules deeper than {depth} are collapsed")
    elif any(len(_module_keys(item)) > depth + 1 for items in members.values() for item in items):
        out.notes.append(f"each module is one box, those deeper than {depth} inside their parent's")
    else:
        out.notes.append("each module is one box")


# -- hard cap -------------------------------------------------------------------------------------------------
def truncate(ir, max_nodes):
    """Keep the ``max_nodes`` items closest to the roots and summarise the rest in one box."""
    if ir.size() <= max_nodes:
        return
    producers, consumers = ir.producers(), ir.consumers()
    roots = sorted((key for key, edges in consumers.items() if not edges), key=lambda k: ir.items[k].order)
    keep, frontier, seen = [], deque(roots), set(roots)
    while frontier and len(keep) < max_nodes - 1:
        key = frontier.popleft()
        keep.append(key)
        for edge in sorted(producers[key], key=lambda e: ir.items[e.src].order):
            if edge.src not in seen:
                seen.add(edge.src)
                frontier.append(edge.src)
    kept = set(keep)
    dropped = [item for key, item in ir.items.items() if key not in kept]
    counts = Counter(item.title for item in dropped if item.kind != "leaf")
    lines = [", ".join(f"{name} ×{n}" for name, n in counts.most_common(4))] if counts else []
    more = Item("more", "more", (10**9,), f"… {len(dropped):,} more nodes", lines,
                nodes=[n for item in dropped for n in item.nodes])
    ir.add(more)
    ir.remap({item.key: "more" for item in dropped})
    ir.notes.append(f"only the {len(keep)} nodes nearest the root are drawn")


# -- ghosts ---------------------------------------------------------------------------------------------------
def ghost_leaves(ir, min_uses):
    """Draw a leaf used ``min_uses`` or more times as a small copy beside each use (after the first)."""
    consumers = ir.consumers()
    ghosted = 0
    for key in sorted(consumers, key=lambda k: ir.items[k].order):
        item = ir.items[key]
        uses = [e for e in consumers[key] if e.kind == "data"]
        if item.kind not in LEAF_KINDS or len(uses) < min_uses:
            continue
        uses.sort(key=lambda e: ir.items[e.dst].order)
        for number, edge in enumerate(uses[1:], start=1):
            target = ir.items[edge.dst]
            ghost = Item(f"{key}_g{number}", item.kind, target.order + (number,), item.title, item.lines[:1],
                         shape=item.shape, calls=list(target.calls), nodes=list(item.nodes),
                         variables=list(item.variables), flags=set(item.flags) | {"ghost"})
            ir.add(ghost)
            edge.src = ghost.key
        ghosted += 1
    if ghosted:
        ir.notes.append(f"{ghosted} reused leaf{'s' if ghosted > 1 else ''} drawn as a ghost at each use")
