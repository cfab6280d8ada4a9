"""nan-inf: the first op whose forward output, or the gradient its backward produced, is NaN or Inf (or, seen
on a light iteration only, the loss or a gradient, with the rerun that names the op)."""

from ...document import is_accumulate_grad
from ...document.index import is_finite_number
from ..records import related
from ..registry import Code, rule

NAN_INF = Code("nan-inf", "warning", "NaN or Inf produced by an op in forward or backward", """\
An op produced NaN or Inf: in its forward output, or in the gradient its backward produced. gradviz checks
every op (like PyTorch's anomaly mode, but always on) and points at the first one, since everything after it
is contaminated.

Common causes: `log` of 0 or of a negative number, `sqrt` at 0 in backward, division by a value that
reaches 0, `exp` of a large number, a learning rate so large that the weights overflow.

Not reported: an infinity that the graph absorbs before it reaches the loss or any output, such as an
attention mask filled with -inf (softmax turns it into 0). If such a value makes a gradient NaN in backward
(`torch.where(x > 0, x.log(), 0)` at x = 0: 0 times 1/0), that gradient is reported.

The mistake:

    p = torch.tensor([0.0, 0.5], requires_grad=True)
    loss = -(p.log()).sum()                   # log(0) = -inf

The fix: keep the argument in the valid range (`p.clamp(min=1e-7).log()`), use the stable fused form
(`log_softmax` + `nll_loss` instead of `softmax().log()`; `cross_entropy` on logits), or lower the learning
rate.

In the picture: the first op with a non-finite value.
""")


@rule(NAN_INF, order=52)
def nan_inf(ctx, out):
    """The first op whose forward output, or the gradient its backward produced, is not finite. A forward -inf
    that the graph absorbs (an attention mask filled with -inf, then softmax) is not reported: only one that
    reaches a value nothing finite was computed from (the loss, an output)."""
    index = ctx.index
    if _light_nan(index, out):
        return
    forward = sorted(n["id"] for n in index.nodes.values() if n.get("nonfinite") == "forward")
    if forward and _reaches_an_output(index, set(forward)):
        node = index.nodes[forward[0]]
        first = index.doc.get("first_nonfinite") or {}
        if first.get("node") == node["id"] and first.get("data_location"):
            _from_data(index, out, node, first)
            return
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
    if op and first.get("phase") == "input" and first.get("data_location"):
        message = (f"{_data_message(index, first.get('data'), first['data_location'], op)}: the loss was "
                   f"{first.get('value') or 'NaN/Inf'} at iteration {it} (at {index.where(first.get('location'))}), "
                   "a light iteration.")
        out.add("nan-inf", message, _DATA_HINT, first["data_location"],
                related=[related("the loss was backwarded here", first.get("location"))],
                details=dict(details, phase="light-input", data=first.get("data")), order=(2, 0))
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


def _from_data(index, out, node, first):
    """The first NaN/Inf forward value was an input the graph did not make (it needs no gradient): named at the
    line that made it (``first_nonfinite.data_location``), the op that received it as related."""
    location = first["data_location"]
    message = (f"{_data_message(index, first.get('data'), location, first.get('data_op') or node['op'])} at "
               f"{index.where(node.get('location'))}, in iteration {first.get('iteration')}; everything computed "
               "from it is contaminated.")
    out.add("nan-inf", message, _DATA_HINT, location,
            related=[related(f"{node['op']} received it here", node.get("location"))], nodes=[node["id"]],
            variables=list(node.get("outputs") or ()),
            details={"phase": "input", "node": node["id"], "data": first.get("data")}, order=(2, node["id"]))


def _data_message(index, name, location, op):
    return (f"the NaN/Inf came in with the data: `{name}`, made at {index.where(location)}, already held it when "
            f"{op} received it")


_DATA_HINT = ("Check the batch where it is loaded (`assert torch.isfinite(x).all()`) and clean the data set or "
              "the transform that produced it; no op of the graph made this value.")


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
