"""Rules about training dynamics and old API: grad-accumulation, nan-inf, exploding-grad / vanishing-grad,
volatile-deprecated."""

import math
import statistics

from ..document import is_accumulate_grad, is_reset_op
from ..document.index import is_finite_number, same_line
from .records import related


def grad_accumulation(index, out):
    """A leaf's gradient carried from before one optimizer step into the backward after it, with nothing
    (``zero_grad``, ``p.grad = None``) resetting it before an optimizer steps that leaf again: that step uses the
    sum. Gradients left over in parameters that are reset before their optimizer's next step (a GAN's generator
    step backwards through the discriminator, whose ``zero_grad()`` clears them before its own step) are harmless."""
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
            leaf = _reset_leaf(index, rec)
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


def _reset_leaf(index, e):
    """The leaf whose gradient an in-place event resets to zero (``p.grad.zero_()``, ``p.grad.fill_(0)``, also
    through ``p.grad.data``/``detach()``), or None."""
    if not is_reset_op(e):
        return None
    v = index.variables.get(e.get("variable")) or {}
    for _ in range(4):  # .data / detach() of the gradient share its memory
        if v.get("origin") == "grad":
            return v.get("source")
        if v.get("origin") not in ("data", "detach") or v.get("source") is None:
            return None
        v = index.variables.get(v["source"]) or {}
    return None


def nan_inf(index, out):
    """The first op whose forward output, or the gradient its backward produced, is not finite. A forward -inf
    that the graph absorbs (an attention mask filled with -inf, then softmax) is not reported: only one that
    reaches a value nothing finite was computed from (the loss, an output)."""
    if _light_nan(index, out):
        return
    forward = sorted(n["id"] for n in index.nodes.values() if n.get("nonfinite") == "forward")
    if forward and _reaches_an_output(index, set(forward)):
        node = index.nodes[forward[0]]
        outputs = list(node.get("outputs") or ())
        inputs = [v for v in node.get("input_variables") or () if v is not None]
        message = (f"{node['op']} at {index.where(node.get('location'))} produced NaN/Inf in its forward output "
                   f"(shape {tuple(node.get('shape') or ())}); everything computed from it is contaminated.")
        out.add("nan-inf", message, _NAN_HINT, node.get("location"), nodes=[node["id"]],
                variables=outputs + inputs, details={"phase": "forward", "node": node["id"],
                                                     "nodes_affected": len(forward)},
                order=(2, node["id"]))
        return
    for b in index.backwards:
        culprit = _backward_culprit(index, b)
        if culprit is None:
            continue
        node = index.nodes.get(culprit) or {}
        message = (f"the backward of {node.get('op')} at {index.where(node.get('location'))} produced a NaN/Inf "
                   f"gradient (during backward at {index.where(b.get('location'))}); every gradient after it is "
                   "contaminated.")
        out.add("nan-inf", message, _NAN_HINT, node.get("location"),
                related=[related("backward ran here", b.get("location"))], nodes=[culprit],
                variables=list(node.get("outputs") or ()), details={"phase": "backward", "node": culprit,
                                                                    "backward": b["id"]},
                order=(2, culprit))
        return


def _light_nan(index, out):
    """A NaN/Inf loss or gradient first seen on a light iteration (docs/how-it-works.md, "Light iterations"), before
    any recorded op made one: named with its iteration and the rerun that traces it in full. True when reported
    (what full iterations saw after it is its consequence: the parameters are NaN by then)."""
    light = (index.doc.get("schedule") or {}).get("light") or {}
    found = [f for f in (light.get("nonfinite_loss"), light.get("nonfinite_grad")) if isinstance(f, dict)]
    if not found:
        return False
    first = min(found, key=lambda f: f.get("iteration") or 0)
    it = first.get("iteration")
    recorded = index.doc.get("first_nonfinite") or {}
    if recorded.get("iteration") is not None and recorded["iteration"] <= (it or 0):
        return False
    if first is light.get("nonfinite_loss"):
        what = f"the loss was {first.get('value') or 'NaN/Inf'} at iteration {it}"
    else:
        what = f"the gradient of `{first.get('parameter') or 'a parameter'}` was NaN/Inf at iteration {it}"
    script = index.doc.get("script") or "SCRIPT"
    rerun = f"gradviz run --trace-steps {it}:{it} {script}"
    op, op_location = first.get("op"), first.get("op_location")
    details = {"phase": "light", "iteration": it, "rerun": rerun, "trace_steps": [it, it], "op": op}
    if op_location:  # the graph named the op, and one line of the script calls it by name
        message = (f"{op} at {index.where(op_location)} produced NaN/Inf in its forward output at iteration {it}, "
                   f"a light iteration ({what.split(' at iteration')[0]} at {index.where(first.get('location'))}); "
                   "everything computed from it is contaminated. Its line is the one line of the file that calls "
                   "it by name: the iteration's ops were not recorded.")
        out.add("nan-inf", message, _NAN_HINT, op_location,
                related=[related("the loss was backwarded here", first.get("location"))], details=details,
                order=(2, 0))
        return True
    if op and first.get("phase") == "input":
        message = (f"{what} (at {index.where(first.get('location'))}), a light iteration: the NaN/Inf came in with "
                   f"the data — {op} received it in an input that needs no gradient, so no op of the graph made it.")
        hint = (f"Check the batch where it is loaded (`assert torch.isfinite(x).all()`) and clean the data set; "
                f"`{rerun}` traces that iteration in full and names the tensor.")
        out.add("nan-inf", message, hint, first.get("location"), details=dict(details, phase="light-input"),
                order=(2, 0))
        return True
    if op:
        what += f" (made by {op}, whose line no single call in the file names)"
    message = (f"{what} (at {index.where(first.get('location'))}), a light iteration: its ops were not recorded, "
               "so the op and line that made it are not known from this run.")
    hint = f"Rerun with `{rerun}` to trace that iteration in full: the report then names the op and its line."
    out.add("nan-inf", message, hint, first.get("location"), details=details, order=(2, 0))
    return True


def _reaches_an_output(index, bad):
    """True when some non-finite forward value is an end of the graph: a node in ``bad`` that no recorded op
    consumed (the loss itself, a kept output, or a value whose consumers the document does not hold). When
    every non-finite value only feeds ops whose results are finite, something absorbed it (softmax of -inf is
    0, ``where`` picks the other branch); a NaN gradient it leads to in backward is reported on its own."""
    return any(not index.consumers(n) for n in bad)


_NAN_HINT = ("Keep the op's input in its valid range (`x.clamp(min=1e-7).log()`), use the fused stable form "
             "(log_softmax + nll_loss, cross_entropy on logits), or lower the learning rate.")


def _backward_culprit(index, b):
    """The node whose backward produced the first non-finite gradient: the first visited node that received one
    was handed it by a consumer that itself received a finite gradient (or it is a root given a bad one).
    Falls back on the nodes the tracer flagged during backward."""
    norms = b.get("grad_norms") or {}
    visited = list(b.get("visited") or ())
    flagged = [n for n in visited if (index.nodes.get(n) or {}).get("nonfinite") == "backward"]
    bad = [n for n in visited if not is_finite_number(_norm(norms, n))] or flagged
    for nid in bad:
        for c in visited:
            node = index.nodes.get(c) or {}
            if c != nid and any(edge and edge[0] == nid for edge in node.get("inputs") or ()) \
                    and is_finite_number(_norm(norms, c)):
                return c
        if not is_accumulate_grad(index.nodes.get(nid)):
            return nid
    return None


def _norm(norms, node_id):
    value = norms.get(str(node_id))
    return norms.get(node_id) if value is None else value


_FAR = 1e3  # a layer's gradient norm this many times above/below the others' median


def gradient_scale(index, out):
    """Per-layer gradient norms (the parameters' combined norm, grouped by module path) far outside the rest,
    judged on the last completed backward that reached three or more layers. Only the gradients an optimizer
    then steps with count: a GAN's generator backward also reaches the discriminator, whose gradients are reset
    before they are used."""
    unused = _gradients_reset_unused(index)
    for b in reversed(index.backwards):
        layers = _layer_norms(index, b, unused.get(b.get("id"), set()))
        if len(layers) >= 3:
            break
    else:
        return
    for layer, (norm, params) in sorted(layers.items()):
        others = [n for name, (n, _) in layers.items() if name != layer]
        median = statistics.median(others)
        if median <= 0 or not math.isfinite(norm):
            continue
        ratio = norm / median
        if ratio >= _FAR:
            code, word = "exploding-grad", "above"
        elif ratio <= 1 / _FAR:
            code, word = "vanishing-grad", "below"
        else:
            continue
        factor = ratio if ratio >= 1 else (1 / ratio if ratio > 0 else math.inf)
        message = (f"layer `{layer}` has gradient norm {norm:.3g}, {factor:.3g}× {word} the median of the other "
                   f"layers ({median:.3g}) in backward at {index.where(b.get('location'))}.")
        hint = ("Check the layer's input scale and initialisation; use normalisation or residual connections; "
                "clip with `clip_grad_norm_` if it explodes.")
        out.add(code, message, hint, b.get("location"),
                nodes=[index.variables[p].get("accumulator") for p in params], variables=params,
                details={"layer": layer, "norm": norm, "median_others": median, "backward": b["id"]},
                order=(2, params[0]))


def _gradients_reset_unused(index):
    """``{backward id: {leaf ids}}``: the leaves a backward reached whose gradient is reset (``zero_grad``,
    ``p.grad = None``, ``p.grad.zero_()``) before an optimizer steps them, or that an optimizer steps elsewhere in
    the trace but not after this backward. The rest (stepped next, or no optimizer ever steps them: updated by
    hand) are the gradients that train something."""
    unused = {}
    timeline = index.timeline()
    # after the last record, a leaf some optimizer steps is not stepped again: its gradient is not used
    next_is_reset = {p: True for kind, rec in timeline if kind == "optimizer" and rec.get("event") == "step"
                     for p in rec.get("parameters") or ()}
    for kind, rec in reversed(timeline):
        if kind == "optimizer":
            reset = rec.get("event") == "zero_grad"
            if reset or rec.get("event") == "step":
                for p in rec.get("parameters") or ():
                    next_is_reset[p] = reset
        elif kind == "grad_write":
            next_is_reset[rec.get("variable")] = True
        elif kind == "inplace":
            leaf = _reset_leaf(index, rec)
            if leaf is not None:
                next_is_reset[leaf] = True
        elif kind == "backward":
            unused[rec.get("id")] = {int(k) for k in rec.get("leaf_grad_norms") or {} if next_is_reset.get(int(k))}
    return unused


def _layer_norms(index, b, unused=frozenset()):
    if b.get("error"):
        return {}
    layers = {}
    for key, value in (b.get("leaf_grad_norms") or {}).items():
        v = index.variables.get(int(key)) or {}
        if not v.get("is_parameter") or not v.get("name") or v["id"] in unused:
            continue
        layer = v["name"].rsplit(".", 1)[0] if "." in v["name"] else v["name"]
        norm = float(value) if is_finite_number(value) else math.inf
        total, params = layers.get(layer, (0.0, []))
        layers[layer] = (total + norm * norm, params + [v["id"]])
    return {name: (math.sqrt(total), params) for name, (total, params) in layers.items()}


def volatile_deprecated(index, out):
    for v in sorted(index.variables.values(), key=lambda v: v["id"]):
        if not v.get("volatile") or v.get("origin") not in ("new", "factory"):
            continue
        message = (f"{index.var_label(v['id'])} is created with volatile=True: volatile was removed in PyTorch "
                   "0.4 and has no effect there (gradviz still honours it: nothing computed from it records a "
                   "graph).")
        hint = "Run inference inside `with torch.no_grad():` instead of marking inputs volatile."
        out.add("volatile-deprecated", message, hint, v.get("location"), variables=[v["id"]],
                details={"variable": v["id"]}, order=(2, v["id"]))
