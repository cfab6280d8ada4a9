"""ddp-unused-parameters: parameters of a DDP module some rank's backward gave no gradient, at the line of the
call the branch skipped; PyTorch's "Expected to have finished reduction" error is turned into it."""

from ..backward_rules import script_exception
from ..ddp_rules import alone, job_ranks, line_key, line_text, names_text, ranks_text
from ..records import related
from ..registry import Code, rule

DDP_UNUSED_PARAMETERS = Code("ddp-unused-parameters", "error",
                             "parameters of a DDP module got no gradient on some ranks",
                             """\
Parameters of a module wrapped in DistributedDataParallel got no gradient from some rank's backward.

DDP all-reduces gradients in buckets while backward runs, and by default (`find_unused_parameters=False`) it
waits for every wrapped parameter's gradient before it considers an iteration's reduction done. A parameter
that took no part in the loss never reports ready: the rank that skipped it raises, at its next forward,
PyTorch's "Expected to have finished reduction in the prior iteration before starting a new one", and the
other ranks, whose all-reduce of that bucket never gets a partner, hang or fail with a closed connection.
gradviz names the parameters, the ranks whose backward missed them, and the line of the call the branch
skipped (where that layer is called in other iterations or on other ranks); PyTorch's error, when a rank
raised it, is turned into this diagnostic.

The mistake (a layer skipped on one rank):

    class Net(nn.Module):
        def forward(self, x, rank):
            h = torch.relu(self.a(x))
            if rank == 0:                 # rank 1 never calls self.b
                h = torch.relu(self.b(h))
            return self.out(h)

    model = DistributedDataParallel(Net())

The fix depends on whether the branch is on purpose:

- the layer should run everywhere: take the same branch on every rank (decide it from a value that was
  all-reduced or broadcast), or keep the parameters in the graph, e.g. `h = h + 0 * self.b(h)` when skipping;
- the branch is real (mixture of experts, a conditional head): pass `find_unused_parameters=True` to
  `DistributedDataParallel(...)`; DDP then walks the graph after each forward to mark what was not used (a
  cost per iteration) and averages the gradient with zeros from the ranks that skipped;
- the parameters are never used on any rank: remove them, or freeze them (`requires_grad_(False)`) before
  wrapping; `find_unused_parameters=True` would only hide them.

The severity says which case it is: an error when `find_unused_parameters=False` (a crash or a hang), a
warning for parameters no rank ever uses while `find_unused_parameters=True` pays for finding them, an info
when that flag handles a branch taken on some ranks or iterations only.
""")


@rule(DDP_UNUSED_PARAMETERS, order=70)
def ddp_unused_parameters_alone(ctx, out):
    """A DDP model in a one-rank group: PyTorch's reduction error the script died of, then the parameters its
    backward missed (no second rank needed)."""
    _reduction_error(ctx.index, out)
    unused_parameters(alone(ctx.doc), out)


@rule(DDP_UNUSED_PARAMETERS, order=70, scope="job")
def ddp_unused_parameters(ctx, out):
    """Every rank's: leaves the findings' keys in ``ctx.shared["ddp_unused_parameters"]`` (ddp-divergent-graph
    links the branch that skipped a layer to where the graphs part)."""
    ctx.shared["ddp_unused_parameters"] = unused_parameters(job_ranks(ctx), out)


def _reduction_error(index, out):
    """DDP's "Expected to have finished reduction" error. When the DDP watcher saw it (the document's ``ddp``
    section), the DDP rules name the parameters and the skipped line (this process alone, or the job's ranks at
    the merge); otherwise, when this process raised it, it is explained here from the message alone."""
    exc = script_exception(index, "ddp-unused-parameters")
    if exc is None or (index.doc.get("ddp") or {}).get("errors"):
        return
    if exc.get("type") != "RuntimeError":  # (e.g. mp.spawn's ProcessRaisedException: the child's document explains)
        return
    first = str(exc.get("message") or "").split("\n")[0]
    out.add("ddp-unused-parameters",
            f"the script stopped: DistributedDataParallel found parameters that got no gradient in the previous "
            f"iteration ({first})",
            "A branch skipped a layer, or its output did not reach the loss: pass `find_unused_parameters=True` to "
            "DistributedDataParallel(...), or use the layer in every iteration. Run with "
            "TORCH_DISTRIBUTED_DEBUG=INFO to have PyTorch name the parameters.",
            exc.get("location"), details={"exception": exc.get("type"), "ranks": [], "parameters": []},
            order=(3, 0))


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
            by_site.setdefault(line_key(site), (site, called, owner, []))[3].append(name)
        for site, called, owner, names in by_site.values():
            keys.append(_report_unused(ranks, out, path, module, names, params, site, called, owner,
                                       errors.get(path, ())))
    return keys


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
        skipped = f"`{owner}` was called at {line_text(site)} but its output did not reach the loss"
    else:
        skipped = f"the call of `{owner}` at {line_text(site)} was skipped"
    message = (f"{names_text(names)} of DDP module `{path}` got no gradient on {ranks_text(involved)} "
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
        message += f". {ranks_text([error[0]])} raised it at {line_text(error[1].get('location'))}"
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
