"""nonscalar-backward: backward() on a Variable with more than one element and no gradient, linked to the
none-grad read that gave it None when that is where its gradient came from."""

from ...document.index import same_line
from ..backward_rules import backward_root, failed_with, script_stopped
from ..records import related
from ..registry import Code, rule

NONSCALAR_BACKWARD = Code("nonscalar-backward", "error", "backward() on a non-scalar output without a gradient",
                          """\
backward() was called on a Variable with more than one element and no `gradient` argument
("grad can be implicitly created only for scalar outputs").

backward() computes d(root)/d(leaves). For a scalar root the starting gradient is 1; for a vector or matrix
there is no single obvious starting gradient, so you must pass one with the same shape as the root. Passing
None (for example the `.grad` of a non-leaf, which is always None) is the same as passing nothing: gradviz
links this diagnostic to the `none-grad` read where the None came from.

The mistake:

    y1 = model1(X)                # shape (N, 8)
    loss = criterion(model2(y1), y)
    loss.backward()
    y1.backward(y1.grad)          # y1.grad is None -> RuntimeError

The fix: call backward once on the scalar loss; it already reaches model1 through y1:

    loss = criterion(model2(model1(X)), y)
    loss.backward()

If the root really is a vector, reduce it (`out.sum().backward()`) or pass its gradient explicitly
(`out.backward(torch.ones_like(out))`).

In the picture: the root node of the failed backward.
""")


@rule(NONSCALAR_BACKWARD, order=12)
def nonscalar_backward(ctx, out):
    index = ctx.index
    none_keys = ctx.shared.get("none_grad", {})
    for b in failed_with(index, "nonscalar-backward"):
        _nonscalar(index, out, b, none_keys)
    script_stopped(index, out, "nonscalar-backward")


def _nonscalar(index, out, b, none_keys):
    root = backward_root(index, b)
    v = index.variables.get(root) or {}
    read = _gradient_read(index, b)
    label = index.var_label(root)
    if read is not None and read.get("was_none"):
        source = index.var_name(read.get("variable"))
        message = (f"backward() on non-scalar {label} needs a gradient of the same shape, but got None: it "
                   f"is `{source}.grad`, read at {index.where(read.get('location'))}, which is None because "
                   f"`{source}` is not a leaf.")
        hint = ("Don't backward twice: chain the models and call backward once on the scalar loss (it already "
                f"reaches everything before `{source}`).")
    else:
        message = (f"backward() on {label} with no gradient: grad can be implicitly created only for scalar "
                   "outputs.")
        hint = ("Reduce the output to a scalar (`.sum()`, `.mean()`, a loss) or pass a gradient of its shape "
                "(`out.backward(torch.ones_like(out))`).")
    key = out.add("nonscalar-backward", message, hint, b.get("location"),
                  related=[related("root created here", v.get("location")),
                           related("None read here", read and read.get("location"))],
                  nodes=list(b.get("root_nodes") or [v.get("node")]), variables=[root],
                  details={"backward": b["id"], "gradient_from": read and read["id"]}, order=(1, b["id"]))
    if read is not None and read["id"] in none_keys:
        out.link(key, none_keys[read["id"]])


def _gradient_read(index, b):
    """The `.grad` read whose value was passed as this backward's gradient (recorded, else on the same line)."""
    if b.get("gradient_from") is not None:
        return index.events_by_id.get(b["gradient_from"])
    reads = [e for e in index.events_of("grad_read") if same_line(e.get("location"), b.get("location"))
             and e.get("iteration") == b.get("iteration")]
    return reads[-1] if reads else None
