"""leaf-inplace: the script died of an in-place operation on a leaf that requires grad."""

from ..backward_rules import exception_variables, script_exception
from ..registry import Code, rule

LEAF_INPLACE = Code("leaf-inplace", "error", "in-place operation on a leaf Variable that requires grad",
                    """\
An in-place op was applied to a leaf that requires grad, such as a parameter ("a leaf Variable that requires
grad is being used in an in-place operation").

Autograd accumulates a leaf's gradient into `.grad`; an in-place change would silently make the recorded
history wrong, so it is refused while grad mode is on.

The mistake:

    w = torch.randn(3, requires_grad=True)
    w.add_(1)                                 # RuntimeError

The fix: update parameters under `torch.no_grad()` (that is what optimizers do), or use an out-of-place op
if the change belongs in the graph:

    with torch.no_grad():
        w.add_(1)

In the picture: the leaf and the in-place op.
""")


@rule(LEAF_INPLACE, order=40)
def leaf_inplace(ctx, out):
    exc = script_exception(ctx.index, "leaf-inplace", unless_a_backward_raised=False)
    if exc is None:
        return
    message = (f"in-place operation on a leaf that requires grad: {exc.get('message')}")
    hint = ("Update parameters under `torch.no_grad()` (as optimizers do), or use an out-of-place op if the "
            "change belongs in the graph.")
    out.add("leaf-inplace", message, hint, exc.get("location"), variables=exception_variables(exc),
            details={"exception": exc.get("type")}, order=(3, 0))
