"""What the rules about training steps share (``rules/grad_accumulation.py``, ``gradient_scale.py``): which
in-place events reset a leaf's gradient."""

from ..document import is_reset_op


def reset_leaf(index, e):
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
