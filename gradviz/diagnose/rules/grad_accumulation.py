"""grad-accumulation: gradients summed across optimizer steps, with no reset between the step that used them
and the backward that added to them."""

from ...document.index import same_line
from ..records import related
from ..registry import Code, rule
from ..training_rules import reset_leaf

GRAD_ACCUMULATION = Code("grad-accumulation", "warning",
                         "gradients summed across optimizer steps (no zero_grad between)",
                         """\
Gradients were summed across two or more optimizer steps: backward adds into `.grad`, and nothing reset it
between steps, so each step uses the sum of all gradients so far.

The mistake:

    for X, y in batches:
        loss = criterion(model(X), y)
        loss.backward()                       # adds to last iteration's .grad
        optimizer.step()

The fix: clear the gradients once per step, before backward:

    for X, y in batches:
        optimizer.zero_grad()
        loss = criterion(model(X), y)
        loss.backward()
        optimizer.step()

(Accumulating over several backward calls and then stepping once, to simulate a bigger batch, is fine: the
mistake is only accumulation across steps.)

gradviz reports it when a step uses the sum: a backward after one step adds to a parameter's gradient, and
the next step of that parameter comes with no reset in between. Gradients left over in parameters that are
reset before their optimizer steps them again are harmless and not reported: in a GAN, the generator's loss
backwards through the discriminator after the discriminator's step, and `netD.zero_grad()` clears that before
the discriminator's next step. (In a long loop the trace keeps full records of the first and last few
iterations only; the rule looks for this within each of those stretches.)

Any reset counts: `optimizer.zero_grad()`, `model.zero_grad()` (with or without `set_to_none`),
`p.grad = None`, `p.grad.zero_()` or `p.grad.data.zero_()`.

In the picture: the parameters whose gradients were summed.
""")


@rule(GRAD_ACCUMULATION, order=54)
def grad_accumulation(ctx, out):
    """A leaf's gradient carried from before one optimizer step into the backward after it, with nothing
    (``zero_grad``, ``p.grad = None``) resetting it before an optimizer steps that leaf again: that step uses the
    sum. Gradients left over in parameters that are reset before their optimizer's next step (a GAN's generator
    step backwards through the discriminator, whose ``zero_grad()`` clears them before its own step) are harmless."""
    index = ctx.index
    # Per parameter: "fresh" (nothing accumulated), "accumulated", "stepped" (accumulated, then a step used it),
    # "carried" (a backward added to gradients a step had already used; the next step of it sums across steps).
    state = {}
    grads = _grad_variables(index)
    last_step = {}
    carried_by = {}  # parameter -> the backward that added to its stepped gradient
    flagged = {}
    seen = None  # the iteration of the record before
    for kind, rec in index.timeline():
        it = rec.get("iteration")
        if _skipped_iterations(seen, it):
            state.clear()  # what happened to the gradients in between is not in the document
        seen = it if isinstance(it, int) else seen
        if kind == "optimizer":
            params = rec.get("parameters") or ()
            if rec.get("event") == "zero_grad":
                for p in params:
                    state[p] = "fresh"
            elif rec.get("event") == "step":
                for summed in rec.get("summed_grads") or ():  # the tracer's own account, across dropped records
                    b = {"id": summed["backward"], "location": summed.get("backward_location")}
                    step = {"id": summed["previous_step"], "location": summed.get("previous_step_location"),
                            "optimizer": summed.get("previous_optimizer")}
                    for p in summed.get("parameters") or ():
                        flagged.setdefault(p, (b, step, rec))
                for p in params:
                    if state.get(p) == "carried":
                        flagged.setdefault(p, (carried_by[p], last_step[p], rec))
                    if state.get(p) in ("accumulated", "carried"):
                        state[p] = "stepped"
                        last_step[p] = rec
        elif kind == "grad_write":
            state[rec.get("variable")] = "fresh"
        elif kind == "inplace":
            leaf = reset_leaf(index, rec)
            if leaf is not None:
                state[leaf] = "fresh"
        elif kind == "backward" and not rec.get("error"):
            fresh = _fresh_grads(index, rec, grads)
            for key in rec.get("leaf_grad_norms") or {}:
                p = int(key)
                if p in fresh:
                    state[p] = "accumulated"
                elif state.get(p) == "stepped":
                    state[p] = "carried"
                    carried_by[p] = rec
                elif state.get(p) != "carried":
                    state[p] = "accumulated"
    if not flagged:
        return
    by_site = {}
    for p, (b, step, used) in sorted(flagged.items()):
        by_site.setdefault((b["id"], step["id"]), (b, step, used, []))[3].append(p)
    for b, step, used, params in by_site.values():
        names = ", ".join(f"`{index.var_name(p)}`" for p in params[:6]) + (" …" if len(params) > 6 else "")
        opt = step.get("optimizer") or "the optimizer"
        if same_line(step.get("location"), used.get("location")):
            then = "and its next step there uses the sum"
        else:
            then = f"and {used.get('optimizer') or opt}.step() at {index.where(used.get('location'))} uses the sum"
        message = (f"backward at {index.where(b.get('location'))} adds to gradients already used by "
                   f"{opt}.step() at {index.where(step.get('location'))}, {then}: no zero_grad() between them, so "
                   f"{len(params)} parameter gradient(s) ({names}) are summed across optimizer steps.")
        hint = "Call `optimizer.zero_grad()` once per step, before backward."
        out.add("grad-accumulation", message, hint, b.get("location"),
                related=[related("previous optimizer step", step.get("location")),
                         related("step that uses the sum", used.get("location"))],
                nodes=[(index.variables.get(p) or {}).get("accumulator") for p in params], variables=params,
                details={"backward": b["id"], "step_event": step["id"], "summed_step_event": used["id"]},
                order=(1, b["id"]))


def _skipped_iterations(before, now):
    """True when the timeline jumps over whole iterations: the tracer kept full records for the first and last
    few iterations only (``window``), so the zero_grad / backward / step of those in between are missing. Every
    iteration ends with a backward or a step, so consecutive records are never more than one iteration apart
    otherwise."""
    return isinstance(before, int) and isinstance(now, int) and now > before + 1


def _grad_variables(index):
    """``{(iteration, file, line): {leaf ids}}``: the leaves whose `.grad` Variable a backward call made anew
    (their `.grad` was None, so something reset it), by that backward's iteration and line."""
    table = {}
    for v in index.variables.values():
        if v.get("origin") == "grad" and v.get("source") is not None:
            loc = v.get("location") or {}
            table.setdefault((v.get("iteration"), loc.get("file"), loc.get("line")), set()).add(v["source"])
    return table


def _fresh_grads(index, b, grads):
    """Leaves whose `.grad` this backward created anew (rather than added to)."""
    loc = b.get("location") or {}
    return grads.get((b.get("iteration"), loc.get("file"), loc.get("line")), set())
