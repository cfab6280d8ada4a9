"""wrong-backward: a custom Function's backward that disagrees with its forward, from the numerical checks the
tracer ran."""

from ...document.index import where
from ..records import related
from ..registry import Code, rule

WRONG_BACKWARD = Code("wrong-backward", "error", "a custom Function's backward disagrees with its forward",
                      """\
A custom `autograd.Function`'s `backward` returned gradients that do not match its `forward`.

gradviz checks every custom Function the first time it runs with a given input signature (shapes, dtypes,
which inputs require grad). On copies of the actual inputs, it compares what backward gives for a random
projection, <J^T v, u>, with the same projection of forward's derivative by central differences, <v, J u>
(two extra forward calls and one backward per input, in float64 when the Function computes in float64). A
disagreement is checked again at slightly moved inputs, so a kink exactly at an input (ReLU at 0) is not
reported. Nothing raises: a wrong backward trains slowly or to the wrong place, silently.

The mistake (a dropped factor):

    class Cube(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * x ** 2          # d(x^3)/dx is 3 x^2

The fix: correct the formula the report points at (the input it names, the line where backward is defined),
and keep it correct with a gradient check in your tests, in float64:

    x = torch.randn(4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(Cube.apply, (x,))

The check runs with the tracer quiet, on copies, with the random state restored, so it changes nothing the
script computes or prints. Turn it off with `gradviz run --no-check-backward` or
`gradviz.trace(check_backward=False)`; the report lists what was checked and what was skipped.

In the picture: the Function's node.
""")


@rule(WRONG_BACKWARD, order=60)
def wrong_backward(ctx, out):
    """Each failed backward check: at the line the Function was applied, naming the class, the input whose
    gradient is wrong, where backward is defined and how far off it is."""
    index = ctx.index
    for check in (index.doc.get("backward_checks") or {}).get("checks") or ():
        if check.get("status") != "failed":
            continue
        name = check.get("class_name") or "Function"
        i = check.get("input")
        arg = f"input {i}" + (f" (`{check['input_name']}`)" if check.get("input_name") else "")
        error = check.get("relative_error")
        defined = check.get("backward_location")
        message = (f"`{name}.backward` is wrong: its gradient for {arg} disagrees with finite differences of "
                   f"`{name}.forward` at the inputs it was applied to (relative error {_fmt(error)}: backward "
                   f"gives {_fmt(check.get('backward_value'))} where forward's slope is "
                   f"{_fmt(check.get('numerical_value'))}, along a random direction).")
        hint = (f"Fix the gradient `{name}.backward` returns for {arg} (defined at {where(defined)}); keep it right "
                f"with `torch.autograd.gradcheck({name}.apply, inputs)` on float64 inputs in a test.")
        out.add("wrong-backward", message, hint, check.get("location"),
                related=[related("backward defined here", defined)],
                nodes=[check.get("node")], details={"check": check.get("id")}, order=(0, check.get("id") or 0))


def _fmt(value):
    if value is None:
        return "?"
    return f"{value:.3g}" if isinstance(value, (int, float)) else str(value)
