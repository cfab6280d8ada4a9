"""ddp-divergent-graph: ranks of a DDP job that built different graphs in one iteration (other ops or lines, not
only other shapes), at the first op where they part."""

from ...document.vocabulary import normalise_op
from ..ddp_rules import job_ranks, line_text, ranks_text
from ..registry import Code, rule

DDP_DIVERGENT_GRAPH = Code("ddp-divergent-graph", "warning",
                           "ranks of a DDP job built different graphs in one iteration",
                           """\
In one iteration the ranks of a DDP job built different autograd graphs (other ops or other lines, not only
other shapes).

Data parallel training assumes every rank runs the same computation on its own data. DDP's reducer
all-reduces the same buckets in the same order on every rank; when a rank-dependent (or data-dependent)
branch runs other layers, some ranks wait for gradients the others never produce: a hang, a timeout, or the
"Expected to have finished reduction" error one iteration later. Even when nothing hangs (the branch uses the
same parameters), the ranks then train different functions. gradviz compares the structure of each
iteration's graphs across ranks and points at the first op where they differ, on the rank that ran the extra
line. Graphs that differ only in shapes (an uneven last batch) are not reported.

The mistake (a branch on the rank's own data):

    out = model(x)
    if x.mean() > 0:                      # true on some ranks only
        out = out * torch.sigmoid(out)
    loss = out.pow(2).mean()

The fix: decide branches from a value every rank shares, e.g. all-reduce the condition first:

    flag = (x.mean() > 0).float()
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    if flag.item() > 0:
        out = out * torch.sigmoid(out)

or, when the branch skips parameters on purpose, pass `find_unused_parameters=True` to DDP.
""")


@rule(DDP_DIVERGENT_GRAPH, order=72, scope="job")
def ddp_divergent_graph(ctx, out):
    """Linked to the ddp-unused-parameters finding at the same line: the branch that skipped a layer is also where
    the graphs part."""
    divergent = divergent_graph(job_ranks(ctx), out)
    for key in ctx.shared.get("ddp_unused_parameters", ()):
        if divergent is not None and key[1:] == divergent[1:]:
            out.link(key, divergent)


def divergent_graph(ranks, out):
    """The first iteration where ranks built graphs that differ in more than shapes: among the iterations every
    rank kept full records of, and, beyond them, where a structure some ranks built and others did not first
    appeared. Returns the finding's key, or None."""
    if len(ranks) < 2:
        return None
    per_rank = [(r, _graphs_by_iteration(r.doc)) for r in ranks]
    common = set.intersection(*(set(g) for _, g in per_rank))
    differing = {}  # iteration -> [(ranks, their ops)] of each group of ranks with the same ops
    for it in sorted(common):
        if len({graphs[it][0] for _, graphs in per_rank}) > 1:
            _note_difference(differing, it, [(r, graphs[it][1]) for r, graphs in per_rank])
    for it, found in _beyond_the_window(ranks, common):
        _note_difference(differing, it, found)
    if not differing:
        return None
    it = min(differing)
    sequences = differing[it]
    index, location = _first_difference(sequences)
    groups = [sorted(r.rank for r in members) for members, _ in sequences]
    text = "; ".join(f"{ranks_text(g)}: {len(ops)} ops" for g, (_, ops) in zip(groups, sequences))
    message = (f"ranks built different graphs in iteration {it} ({text}); they first differ at op {index}, "
               f"{line_text(location)}")
    if len(differing) > 1:
        message += f"; {len(differing)} iterations differ"
    hint = ("A branch that depends on the rank or on the rank's data changes which layers run: DDP all-reduces "
            "the same buckets in the same order on every rank, so a layer run on some ranks only makes the others "
            "wait (a hang, or 'Expected to have finished reduction'). Take the same branch on every rank (decide it "
            "from a value all-reduced or broadcast first), or pass `find_unused_parameters=True`.")
    return out.add("ddp-divergent-graph", message, hint, location,
                   details={"ranks": sorted(rank for g in groups for rank in g), "groups": sorted(groups),
                            "iteration": it, "first_difference": index, "iterations_differing": sorted(differing),
                            "iterations_compared": len(common)})


def _note_difference(differing, iteration, rank_ops):
    """Group the ranks by the ops they ran (op, file, line; shapes aside): two groups or more are a difference
    (graphs that differ only in shapes, an uneven last batch, are not)."""
    by_ops = {}
    for r, ops in rank_ops:
        by_ops.setdefault(tuple(key for key, _ in ops), ([], ops))[0].append(r)
    if len(by_ops) > 1:
        differing[iteration] = sorted(by_ops.values(), key=lambda g: min(r.rank for r in g[0]))


def _beyond_the_window(ranks, common):
    """(iteration, [(rank, ops)]) where a structure some ranks built and others did not first appeared, outside the
    iterations every rank kept (a branch taken once mid-run: the first graph of each structure is always kept, the
    others' graphs of that iteration may not be). A rank without it is represented by the structure it repeated
    over that iteration (the one seen most often), from that structure's first graph."""
    tables = [(r, _structures(r.doc)) for r in ranks]
    everywhere = set.intersection(*(set(t) for _, t in tables))
    firsts = {}  # iteration -> signatures first seen there on some ranks only
    for _, table in tables:
        for sig, (structure, _) in table.items():
            if sig not in everywhere and structure["iterations"][0] not in common:
                firsts.setdefault(structure["iterations"][0], set()).add(sig)
    for it in sorted(firsts):
        found = []
        for r, table in tables:
            mine = [table[sig] for sig in firsts[it] if sig in table and table[sig][0]["iterations"][0] == it]
            if not mine:
                over = [e for e in table.values() if e[0]["iterations"][0] <= it <= e[0]["iterations"][-1]]
                mine = sorted(over, key=lambda e: -e[0]["count"])[:1]
            if not mine:
                break
            found.append((r, mine[0][1]))
        else:
            yield it, found


def _structures(doc):
    """signature -> (structure, the ops of its first graph) for the structures whose first graph a backward ran
    through and whose records are kept."""
    graphs = {g["id"]: g for g in doc.get("graphs", ())}
    nodes = {n["id"]: n for n in doc.get("nodes", ())}
    table = {}
    for s in doc.get("structures", ()):
        first = graphs.get(s.get("first_graph"))
        if first is not None and first.get("backwarded") is not False and s.get("iterations"):
            table[s.get("signature")] = (s, _ops(first, nodes))
    return table


def _graphs_by_iteration(doc):
    """iteration -> (the structure signatures of its backwarded graphs, their ops in creation order as
    ((op, file, line), loc))."""
    signatures = {s["id"]: s.get("signature") for s in doc.get("structures", ())}
    nodes = {n["id"]: n for n in doc.get("nodes", ())}
    by_it = {}
    for g in doc.get("graphs", ()):
        if g.get("backwarded") is False:  # DDP all-reduces in backward: a graph no backward ran through (a metric
            continue                      # computed on one rank) does not make the ranks wait
        entry = by_it.setdefault(g["iteration"], [[], []])
        entry[0].append(signatures.get(g.get("structure")))
        entry[1].extend(_ops(g, nodes, with_ids=True))
    result = {}
    for it, (sigs, ops) in by_it.items():
        ops.sort(key=lambda o: o[0])
        result[it] = (tuple(sorted(str(s) for s in sigs)), [(key, loc) for _, key, loc in ops])
    return result


def _ops(graph, nodes, with_ids=False):
    """A graph's op nodes in creation order: ((op, file, line), location), with the node id first if asked."""
    ops = []
    for nid in sorted(graph.get("nodes", ())):
        n = nodes.get(nid)
        if n is None or normalise_op(n["op"]) == "AccumulateGrad":
            continue
        loc = n.get("location") or {}
        key = (normalise_op(n["op"]), loc.get("file"), loc.get("line"))
        ops.append((nid, key, n.get("location")) if with_ids else (key, n.get("location")))
    return ops


def _first_difference(sequences):
    """The position of the first op where the groups' op sequences differ, and the line of that op on a group that
    ran a line the others did not (the branch)."""
    lists = [s for _, s in sequences]
    index = 0
    while all(index < len(s) for s in lists) and len({s[index][0] for s in lists}) == 1:
        index += 1
    candidates = [s[index] for s in lists if index < len(s)]
    lines = [{(key[1], key[2]) for key, _ in s} for s in lists]
    for key, loc in candidates:
        if any((key[1], key[2]) not in other for other in lines):
            return index, loc
    return index, candidates[0][1] if candidates else None
