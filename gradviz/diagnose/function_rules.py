"""Rules about user-defined Functions: wrong-backward, from the numerical checks the tracer ran."""

from ..document.index import where
from .records import related


def wrong_backward(index, out):
    """Each failed backward check: at the line the Function was applied, naming the class, the input whose
    gradient is wrong, where backward is defined and how far off it is."""
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
