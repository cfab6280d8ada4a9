"""no-requires-grad: backward() on a result that does not require grad, with the reason it does not."""

import re

from ...document.index import code_text
from ..backward_rules import backward_root, failed_with, script_stopped
from ..records import related
from ..registry import Code, rule
from ..why import classify

NO_REQUIRES_GRAD = Code("no-requires-grad", "error", "backward() on a result that does not require grad",
                        """\
backward() was called on a result that does not require grad and has no grad_fn ("element 0 of tensors does
not require grad and does not have a grad_fn").

An op's output requires grad only if one of its inputs does, and only while grad mode is on. So the result
has no history when every input was frozen (`requires_grad=False`), when it was computed under
`torch.no_grad()`, or when an input was volatile (the old inference flag).

The mistake:

    with torch.no_grad():
        out = model(X)                        # no graph is recorded
    loss = criterion(out, y)
    loss.backward()                           # RuntimeError

The fix: compute what you differentiate with grad mode on and with at least one input (usually the
parameters) requiring grad. To freeze part of a model, freeze only that part:
`for p in backbone.parameters(): p.requires_grad = False`, and keep the head trainable.

In the picture: the root of the failed backward, with the reason in the label.
""")


@rule(NO_REQUIRES_GRAD, order=36)
def no_requires_grad(ctx, out):
    index = ctx.index
    for b in failed_with(index, "no-requires-grad"):
        _no_requires_grad(index, out, b)
    script_stopped(index, out, "no-requires-grad")


def _no_requires_grad(index, out, b):
    root = backward_root(index, b)
    why = classify(index, root) if root in index.variables else None
    v = index.variables.get(root) or {}
    if why is not None and why["cause"] == "requires-grad-false" and not v.get("location"):
        # Ops on values that require no grad are not recorded, so the root may have no history here: the
        # nearest value built under no_grad() or from a volatile input in this iteration tells why.
        why = _nearest_gradless(index, b) or why
    cause = why["cause"] if why else None
    reason = {
        "no-grad-mode": "it was computed under no_grad()",
        "volatile": "it was computed from a volatile input (volatile=True)",
        "non-differentiable": "it comes from a non-differentiable op (argmax, a comparison, an integer cast)",
        "cut": "it was cut out of the graph by .data/detach()",
    }.get(cause, "none of the values it was computed from required grad (are all parameters frozen?)")
    if why is not None and why["variable"] != root and why.get("location"):
        reason += f" (at {index.where(why['location'])})"
    message = (f"backward() on `{root_name(index, b, root)}`, which does not require grad and has no grad_fn: "
               f"{reason}.")
    hint = ("Compute the loss with grad mode on, from parameters that require grad: freeze only the layers you "
            "don't train, and keep no_grad()/volatile for inference.")
    out.add("no-requires-grad", message, hint, b.get("location"),
            related=[related("root computed here", v.get("location"))],
            variables=[root], details={"backward": b["id"], "why_none": why}, order=(1, b["id"]))


def _nearest_gradless(index, b):
    # Lines that built parameters are skipped: initialisers write into parameters under no_grad().
    param_lines = {(loc.get("file"), loc.get("line")) for v in index.variables.values()
                   if v.get("is_parameter") and (loc := v.get("location"))}
    candidates = [v for v in index.variables.values()
                  if v.get("origin") == "op" and v.get("iteration") == b.get("iteration")
                  and (v.get("volatile") or not v.get("grad_mode", True))
                  and ((v.get("location") or {}).get("file"), (v.get("location") or {}).get("line"))
                  not in param_lines]
    if not candidates:
        return None
    return classify(index, max(candidates, key=lambda v: v["id"])["id"])


def root_name(index, b, root):
    """How to name a backward's root: its name, else the receiver on the backward line (``loss.backward()``)."""
    name = index.var_name(root)
    if name == f"v{root}":
        match = _RECEIVER.search(code_text(b.get("location")))
        if match:
            return match.group(1)
    return name


_RECEIVER = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\.backward\(")
