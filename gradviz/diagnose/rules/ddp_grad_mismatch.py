"""ddp-grad-mismatch: a parameter's gradient that differs across ranks at an optimizer step."""

from ..ddp_rules import job_ranks, names_text, ranks_text
from ..records import related
from ..registry import Code, rule

DDP_GRAD_MISMATCH = Code("ddp-grad-mismatch", "error",
                         "a parameter's gradient differs across DDP ranks at an optimizer step",
                         """\
At an optimizer step, a parameter's gradient was not the same on every rank.

After DDP's all-reduce every rank holds the same averaged gradient, so the replicas stay identical. gradviz
takes a fingerprint of each gradient the optimizer is given (its norm and its sum) on every rank and
compares them. A difference means the gradient was never all-reduced, most often because the layer is not
part of the module wrapped in DDP, or that code after backward changed it per rank (a hook, scaling or
clipping by a rank-local value). The replicas then drift apart silently; nothing raises. When the trace saw
the write into `.grad` (`p.grad.mul_(…)`, `p.grad = …`) on some ranks only, the diagnostic is at that line.

Data parallelism written by hand (no DDP: `dist.all_reduce(p.grad)` in a loop before the step) gets the same
check: the parameters whose gradients the loop never reduced are named at the loop's `all_reduce` line.

The mistake (a head kept outside the DDP module):

    model = DistributedDataParallel(backbone)
    head = nn.Linear(16, 1)               # not wrapped: its gradients stay per rank
    opt = torch.optim.SGD([*model.parameters(), *head.parameters()], lr=0.1)
    loss = head(model(x)).pow(2).mean()

The fix: wrap one module that holds every trained layer:

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone, self.head = backbone, nn.Linear(16, 1)

    model = DistributedDataParallel(Net())

or all-reduce the other gradients yourself before the step (`dist.all_reduce(p.grad); p.grad /= world_size`).
""")

# two ranks' gradients after an all-reduce are the same bits; this only absorbs printing and rounding of the sum
_GRAD_TOLERANCE = 1e-6


@rule(DDP_GRAD_MISMATCH, order=76, scope="job")
def ddp_grad_mismatch(ctx, out):
    grad_mismatch(job_ranks(ctx), out)


def grad_mismatch(ranks, out):
    """The first optimizer step at which a parameter's gradient is not the same on every rank; with a gradient
    all-reduce written by hand (no DDP), the first step that left some parameters' gradients unreduced."""
    if len(ranks) < 2:
        return
    if not any(r.modules for r in ranks):
        _by_hand(ranks, out)
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
        message = (f"the gradients of {names_text(names)} differ across ranks at optimizer step {step} "
                   f"(`{first}` norm {shown}): {names_text(outside)} "
                   f"{'is' if len(outside) == 1 else 'are'} not in any DDP module, so nothing all-reduces "
                   f"{'it' if len(outside) == 1 else 'them'} and the ranks' copies drift apart")
        hint = ("Make the layer part of the model you wrap in DistributedDataParallel (a submodule of it), or "
                "all-reduce its gradients yourself before `step()` "
                "(`dist.all_reduce(p.grad); p.grad /= world_size`).")
    else:
        message = (f"the gradients of {names_text(names)} differ across ranks at optimizer step {step} after "
                   f"DDP's all-reduce (`{first}` norm {shown}): something changed them per rank afterwards")
        hint = ("Look for code between `backward()` and `step()` that depends on the rank: a gradient hook, "
                "scaling or clipping by a rank-local value, or writing `.grad` by hand.")
        writes = _grad_writes(ranks, names, records[0].get("iteration"))
        if writes:  # the trace saw the write: name it, and the ranks that made it
            where, writers, param = writes[0]
            location = where
            only = writers if len(writers) < len(ranks) else None
            message = (f"{message}: {'only ' + ranks_text(only) if only else 'each rank'} wrote `{param}`'s "
                       f"gradient after the all-reduce, at line {where.get('line')} (`{where.get('text')}`)")
            hint = ("Make the same change on every rank before the gradients are averaged (or none at all): a "
                    "write into `.grad` after `backward()` on some ranks only leaves the replicas different. "
                    "Scale the loss instead, or all-reduce the gradient again after the write.")
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


def _grad_writes(ranks, names, iteration):
    """``[(location, [ranks], parameter)]``, first line first: the writes into a differing parameter's ``.grad``
    the ranks' traces saw in the step's iteration: ``p.grad = …`` / ``p.grad /= …`` (a ``grad_write`` event) and
    an in-place op on the tensor read from ``.grad`` on the same line (``p.grad.mul_(0.5)``)."""
    found = {}
    for r in ranks:
        ids = {v["id"]: v["name"] for v in r.doc.get("variables", ()) if v.get("name") in names}
        read_at = {}  # (file, line) -> parameter, where a .grad of a differing parameter was read
        for e in r.doc.get("events", ()):
            if e.get("iteration") != iteration or not e.get("location"):
                continue
            where = e["location"]
            key = (where.get("file"), where.get("line"))
            if e.get("kind") == "grad_read" and e.get("variable") in ids:
                read_at[key] = ids[e["variable"]]
            elif e.get("kind") == "grad_write" and e.get("variable") in ids:
                found.setdefault(key, (where, [], ids[e["variable"]]))[1].append(r.rank)
            elif e.get("kind") == "inplace" and key in read_at:
                found.setdefault(key, (where, [], read_at[key]))[1].append(r.rank)
    return sorted(((w, sorted(set(rs)), p) for w, rs, p in found.values()), key=lambda f: f[0].get("line") or 0)


def _by_hand(ranks, out):
    """Data parallel by hand: the first step after which some stepped parameters' gradients were never passed to
    ``dist.all_reduce`` on some rank, named at the loop's line."""
    steps = [{s["step"]: s for s in r.ddp.get("steps", ()) if s.get("by_hand")} for r in ranks]
    for step in sorted(set.intersection(*(set(s) for s in steps))):
        records = [s[step] for s in steps]
        missed = sorted({n for rec in records for n in rec["by_hand"].get("not_reduced", ())})
        if not missed:
            continue
        location = next((rec.get("reduce_location") for rec in records if rec.get("reduce_location")), None)
        reduced = sorted({n for rec in records for n in rec["by_hand"].get("reduced", ())})
        differ = [n for n in missed if _differ([rec.get("gradients", {}).get(n, []) for rec in records])]
        message = (f"the hand-written gradient all-reduce reduces {names_text(reduced) or 'no gradient'} but never "
                   f"{names_text(missed)}: at optimizer step {step} those gradients are still each rank's own"
                   + (f" (they differ across ranks: {names_text(differ)})" if differ else "")
                   + ", so the ranks' copies drift apart")
        hint = ("All-reduce every parameter's gradient before `step()` (loop over `model.parameters()`, not a "
                "part of it), or wrap the model in DistributedDataParallel, which does it for every parameter.")
        out.add("ddp-grad-mismatch", message, hint, location,
                related=[related("optimizer step", records[0].get("location"))],
                details={"ranks": [r.rank for r in ranks], "parameters": missed, "not_reduced": missed,
                         "reduced": reduced, "step": step, "by_hand": True})
        return


def _first_use(doc, name):
    """The line of the first op that used the parameter called ``name`` (the layer's call)."""
    ids = {v["id"] for v in doc.get("variables", ()) if v.get("name") == name}
    if not ids:
        return None
    for n in sorted(doc.get("nodes", ()), key=lambda n: n["id"]):
        if ids & set(v for v in n.get("input_variables", ()) if v is not None) and n.get("location"):
            return n["location"]
    return None
