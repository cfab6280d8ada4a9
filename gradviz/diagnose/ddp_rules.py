"""DistributedDataParallel diagnostics over a job: every rank's trace document, compared.

``diagnose_job(rank_docs)`` is a pure function of the documents (their ``ddp`` sections, written by the torch
adapter's DDP watcher, and their graphs and structures). Each finding names the ranks involved
(``details["ranks"]``) and, where it is about parameters, which (``details["parameters"]``):

- ``ddp-unused-parameters``: wrapped parameters some rank's backward gave no gradient, at the line of the call
  the branch skipped (or PyTorch's own "Expected to have finished reduction" error turned into that);
- ``ddp-divergent-graph``: ranks built different graphs in one iteration;
- ``ddp-accumulate-without-no-sync``: micro-steps before one optimizer step each all-reduced;
- ``ddp-grad-mismatch``: a parameter's gradient differs across ranks at an optimizer step.
"""

from ..document.vocabulary import normalise_op
from .records import Collector, related

# two ranks' gradients after an all-reduce are the same bits; this only absorbs printing and rounding of the sum
_GRAD_TOLERANCE = 1e-6


def diagnose_job(rank_docs):
    """The DDP diagnostics of a job, given each rank's document (a ``process.rank`` field, or else the list order,
    gives each document's rank)."""
    ranks = [_Rank(doc, i) for i, doc in enumerate(rank_docs)]
    ranks.sort(key=lambda r: r.rank)
    out = Collector()
    if any(r.ddp for r in ranks):
        skipped = unused_parameters(ranks, out)
        divergent = divergent_graph(ranks, out)
        for key in skipped:  # the branch that skipped a layer is also where the graphs part: one finding, linked
            if divergent is not None and key[1:] == divergent[1:]:
                out.link(key, divergent)
        accumulate_without_no_sync(ranks, out)
        grad_mismatch(ranks, out)
    return out.finish()


def diagnose_process(doc, out):
    """The DDP rules one process can answer alone, into ``out``, when that process is the whole job: a DDP model
    in a one-rank group (``gradviz run`` of a script that wraps its model in DDP with world size 1, or a job of
    one rank). Unused parameters (PyTorch's reduction error among them) and accumulation without ``no_sync`` need
    no second rank; divergent graphs and gradient mismatches do. A rank of a larger job is left to
    ``diagnose_job``, which the merge of the job's documents runs over every rank."""
    ddp = doc.get("ddp")
    if not ddp or not ddp.get("modules"):
        return
    world_size = (ddp.get("process") or {}).get("world_size")
    if world_size not in (None, 1):
        return
    ranks = [_Rank(doc, 0)]
    unused_parameters(ranks, out)
    accumulate_without_no_sync(ranks, out)


class _Rank:
    def __init__(self, doc, position):
        self.doc = doc
        self.ddp = doc.get("ddp") or {}
        process = doc.get("process") or self.ddp.get("process") or {}
        rank = process.get("rank")
        self.rank = rank if isinstance(rank, int) and not isinstance(rank, bool) else position
        self.modules = {m["path"]: m for m in self.ddp.get("modules", ())}


def _ranks_text(ranks):
    ranks = sorted(ranks)
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(str(r) for r in ranks)


def _names_text(names, most=6):
    names = list(names)
    text = ", ".join(f"`{n}`" for n in names[:most])
    return text + (f" and {len(names) - most} more" if len(names) > most else "")


def _line(location):
    if not location:
        return "an unknown line"
    return f"{location.get('file')}:{location.get('line')}"


# ----- ddp-unused-parameters -------------------------------------------------------------------------------------
def unused_parameters(ranks, out):
    """Per DDP module: the parameters some rank's backward never reached, grouped by the line that skipped them.
    Returns the findings' keys."""
    keys = []
    found = {}  # module path -> {parameter: {rank: unused entry}}
    errors = {}  # module path -> [(rank, error)]
    for r in ranks:
        for entry in r.ddp.get("unused", ()):
            found.setdefault(entry["module"], {}).setdefault(entry["parameter"], {})[r.rank] = entry
        for error in r.ddp.get("errors", ()):
            errors.setdefault(error["module"], []).append((r.rank, error))
            for name in error.get("parameters", ()):
                per_rank = found.setdefault(error["module"], {}).setdefault(name, {})
                per_rank.setdefault(r.rank, {"module": error["module"], "parameter": name, "count": 1,
                                             "first_forward": max(error.get("forward", 1) - 1, 0),
                                             "location": error.get("location"), "owner_called": None})
    for path, params in found.items():
        module = next((r.modules[path] for r in ranks if path in r.modules), {})
        owners = module.get("owners", {})
        by_site = {}  # the line the branch skipped -> parameters
        for name, per_rank in params.items():
            owner = owners.get(name)
            site, called = _skip_site(ranks, path, owner, per_rank)
            by_site.setdefault(_key(site), (site, called, owner, []))[3].append(name)
        for site, called, owner, names in by_site.values():
            keys.append(_report_unused(ranks, out, path, module, names, params, site, called, owner,
                                       errors.get(path, ())))
    return keys


def _key(location):
    return None if not location else (location.get("file"), location.get("line"))


def _skip_site(ranks, path, owner, per_rank):
    """Where the submodule holding the parameter is called (in another iteration or on another rank): the line the
    branch skipped. ``called`` says whether that submodule was called in the forward that missed it (then its
    output did not reach the loss), None when no rank ever called it (the line is then the DDP module's call)."""
    called = any(e.get("owner_called") for e in per_rank.values())
    for r in sorted(ranks, key=lambda r: (r.rank not in per_rank, r.rank)):
        site = r.modules.get(path, {}).get("call_sites", {}).get(owner)
        if site:
            return site, called
    first = per_rank[min(per_rank)]
    return first.get("location"), None


def _report_unused(ranks, out, path, module, names, params, site, called, owner, errors):
    involved = sorted({rank for n in names for rank in params[n]})
    all_ranks = [r.rank for r in ranks]
    forwards = {r.rank: r.ddp.get("backward_count", 0) for r in ranks}
    always = all(params[n].get(rank, {}).get("count", 0) >= forwards.get(rank, 0) > 0
                 for n in names for rank in all_ranks)
    find_unused = bool(module.get("find_unused_parameters"))
    error = next(((rank, e) for rank, e in errors if set(names) & set(e.get("parameters", ()))), None)
    ddp_line = _ranks_first(ranks, involved, names, params)
    first_forward = min(e.get("first_forward", 0) for n in names for e in params[n].values())
    if called is None:
        skipped = f"no rank ever called `{owner}` in forward"
    elif called:
        skipped = f"`{owner}` was called at {_line(site)} but its output did not reach the loss"
    else:
        skipped = f"the call of `{owner}` at {_line(site)} was skipped"
    message = (f"{_names_text(names)} of DDP module `{path}` got no gradient on {_ranks_text(involved)} "
               f"(first in forward {first_forward}): {skipped}")
    if always:
        severity = "warning" if find_unused else "error"
        message += "; they never get a gradient on any rank"
        hint = ("Remove the layer or use it in forward(); if it is kept on purpose, freeze it "
                "(`requires_grad_(False)`) before wrapping the model in DDP. `find_unused_parameters=True` "
                "only hides it, at the cost of a graph walk every iteration.")
    elif find_unused:
        severity = "info"
        message += ("; find_unused_parameters=True lets DDP reduce without them (their gradient is averaged with "
                    "zeros from the ranks that skipped)")
        hint = ("Nothing hangs. If every rank should train these parameters every step, make the branch the same "
                "on every rank.")
    else:
        severity = "error"
        message += ("; with find_unused_parameters=False DDP waits for their gradients: the next iteration raises "
                    "'Expected to have finished reduction in the prior iteration' (and the other ranks hang)")
        hint = ("The branch is taken on some ranks or iterations only: pass `find_unused_parameters=True` to "
                "DistributedDataParallel(...), or make every rank use the layer each iteration (e.g. add "
                "`0 * layer(h)` to the output when skipping it).")
    if error is not None:
        message += f". {_ranks_text([error[0]])} raised it at {_line(error[1].get('location'))}"
    rel = [related("DDP forward", ddp_line)]
    if error is not None:
        rel.append(related("reduction error raised", error[1].get("location")))
    details = {"ranks": involved, "parameters": sorted(names), "module": path, "find_unused_parameters": find_unused,
               "never_used": always, "first_forward": first_forward,
               "per_rank": {str(rank): sorted(n for n in names if rank in params[n]) for rank in involved},
               "reduction_error_rank": None if error is None else error[0]}
    return out.add("ddp-unused-parameters", message, hint, site or ddp_line, severity=severity, related=rel,
                   details=details)


def _ranks_first(ranks, involved, names, params):
    for rank in involved:
        for n in names:
            entry = params[n].get(rank)
            if entry and entry.get("location"):
                return entry["location"]
    return None


# ----- ddp-divergent-graph ---------------------------------------------------------------------------------------
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
    text = "; ".join(f"{_ranks_text(g)}: {len(ops)} ops" for g, (_, ops) in zip(groups, sequences))
    message = (f"ranks built different graphs in iteration {it} ({text}); they first differ at op {index}, "
               f"{_line(location)}")
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


# ----- ddp-accumulate-without-no-sync ---------------------------------------------------------------------------
def accumulate_without_no_sync(ranks, out):
    """Optimizer steps whose micro-steps all-reduced more than once (no ``no_sync()`` around the earlier ones)."""
    found = {}  # (module, line) -> [rank, first entry, steps]
    for r in ranks:
        acc = r.ddp.get("accumulation") or {}
        first = acc.get("first")
        if not first:
            continue
        key = (first["module"], _key(first.get("location")))
        entry = found.setdefault(key, {"ranks": [], "first": first, "extra": 0})
        entry["ranks"].append(r.rank)
        entry["extra"] = max(entry["extra"], acc.get("extra_syncs", 0))
    for (module, _), entry in found.items():
        first = entry["first"]
        n, synced = first["backwards"], first["synced"]
        message = (f"{n} backward passes of DDP module `{module}` before one optimizer step each all-reduced "
                   f"({synced} all-reduces where 1 is needed) on {_ranks_text(entry['ranks'])}, from step "
                   f"{first['step']}")
        hint = (f"Wrap the first {n - 1} micro-steps (forward and backward) in `with {module}.no_sync():` and let "
                "the last one all-reduce: the gradients summed locally are the same, with one all-reduce per step.")
        out.add("ddp-accumulate-without-no-sync", message, hint, first.get("location"),
                related=[related("optimizer step", first.get("step_location"))],
                details={"ranks": sorted(entry["ranks"]), "module": module, "micro_steps": n,
                         "synchronised": synced, "extra_all_reduces": entry["extra"], "step": first["step"]})


# ----- ddp-grad-mismatch -------------------------------------------------------------------------------------------
def grad_mismatch(ranks, out):
    """The first optimizer step at which a parameter's gradient is not the same on every rank."""
    if len(ranks) < 2:
        return
    steps = [{s["step"]: s for s in r.ddp.get("steps", ())} for r in ranks]
    common = sorted(set.intersection(*(set(s) for s in steps)))
    wrapped = {p for r in ranks for m in r.modules.values() for p in m.get("parameters", ())}
    for step in common:
        records = [s[step] for s in steps]
        names = set.intersection(*(set(rec.get("gradients", {})) for rec in records))  # (empty: not sampled)
        differing = {}
        for name in sorted(names):
            values = [rec["gradients"][name] for rec in records]
            if _differ(values):
                differing[name] = values
        if differing:
            _report_mismatch(ranks, out, step, records, differing, wrapped)
            return


def _differ(values):
    for a in values[1:]:
        for x, y in zip(values[0], a):
            if not (isinstance(x, (int, float)) and isinstance(y, (int, float))):
                if x != y:
                    return True
                continue
            if abs(x - y) > _GRAD_TOLERANCE * max(abs(x), abs(y), 1e-12):
                return True
    return False


def _report_mismatch(ranks, out, step, records, differing, wrapped):
    names = sorted(differing)
    outside = [n for n in names if n not in wrapped]
    location = _first_use(ranks[0].doc, (outside or names)[0]) or records[0].get("location")
    norms = {name: {str(r.rank): values[i][0] for i, r in enumerate(ranks)} for name, values in differing.items()}
    first = names[0]
    shown = ", ".join(f"rank {rank}: {norm:.4g}" if isinstance(norm, float) else f"rank {rank}: {norm}"
                      for rank, norm in norms[first].items())
    if outside:
        message = (f"the gradients of {_names_text(names)} differ across ranks at optimizer step {step} "
                   f"(`{first}` norm {shown}): {_names_text(outside)} "
                   f"{'is' if len(outside) == 1 else 'are'} not in any DDP module, so nothing all-reduces "
                   f"{'it' if len(outside) == 1 else 'them'} and the ranks' copies drift apart")
        hint = ("Make the layer part of the model you wrap in DistributedDataParallel (a submodule of it), or "
                "all-reduce its gradients yourself before `step()` "
                "(`dist.all_reduce(p.grad); p.grad /= world_size`).")
    else:
        message = (f"the gradients of {_names_text(names)} differ across ranks at optimizer step {step} after "
                   f"DDP's all-reduce (`{first}` norm {shown}): something changed them per rank afterwards")
        hint = ("Look for code between `backward()` and `step()` that depends on the rank: a gradient hook, "
                "scaling or clipping by a rank-local value, or writing `.grad` by hand.")
    groups = []  # ranks with the same fingerprint of the first parameter that differs: the odd ones out show
    for i, r in enumerate(ranks):
        home = next((g for g in groups if not _differ([differing[first][g[0][0]], differing[first][i]])), None)
        if home is None:
            groups.append([(i, r.rank)])
        else:
            home.append((i, r.rank))
    out.add("ddp-grad-mismatch", message, hint, location,
            related=[related("optimizer step", records[0].get("location"))],
            details={"ranks": [r.rank for r in ranks], "parameters": names, "not_wrapped": outside, "step": step,
                     "norms": norms, "groups": sorted([rank for _, rank in g] for g in groups)})


def _first_use(doc, name):
    """The line of the first op that used the parameter called ``name`` (the layer's call)."""
    ids = {v["id"] for v in doc.get("variables", ()) if v.get("name") == name}
    if not ids:
        return None
    for n in sorted(doc.get("nodes", ()), key=lambda n: n["id"]):
        if ids & set(v for v in n.get("input_variables", ()) if v is not None) and n.get("location"):
            return n["location"]
    return None
