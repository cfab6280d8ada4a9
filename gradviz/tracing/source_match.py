"""The line of the user's file that made an op, when nothing recorded it: found by the op's name in the source.

A light iteration records no op, so when its loss turns NaN/Inf the op that made the value is found from the graph
(``torch/nan``) but not its line. An op called by name (``torch.sqrt(x)``, ``x.log()``) is found on the
one line of the file that calls that name; when no line or several lines do, there is no answer (an operator such
as ``/`` or ``**`` is never guessed) and the report says so.
"""

import ast
import linecache
import re

from .frames import Location

_SUFFIX = re.compile(r"Backward\d*$")
# PyTorch node name (without "Backward0") -> the names a script calls it by
_CALLED_AS = {
    "Log": ("log",), "Log2": ("log2",), "Log10": ("log10",), "Log1P": ("log1p",), "Sqrt": ("sqrt",),
    "Rsqrt": ("rsqrt",), "Exp": ("exp",), "Exp2": ("exp2",), "Reciprocal": ("reciprocal",), "Acos": ("acos", "arccos"),
    "Asin": ("asin", "arcsin"), "Atanh": ("atanh", "arctanh"), "Acosh": ("acosh", "arccosh"), "Pow": ("pow",),
    "Tan": ("tan",), "Lgamma": ("lgamma",), "Digamma": ("digamma",), "Erfinv": ("erfinv",), "Logit": ("logit",),
    "Div": ("div", "true_divide", "divide"), "Atan2": ("atan2", "arctan2"), "Xlogy": ("xlogy",),
    "Cosh": ("cosh",), "Sinh": ("sinh",), "LogSumExp": ("logsumexp",), "LogSoftmax": ("log_softmax",),
    # losses called through torch.nn.functional (a module's instance is called by the user's own name for it)
    "MseLoss": ("mse_loss",), "L1Loss": ("l1_loss",), "SmoothL1Loss": ("smooth_l1_loss",),
    "HuberLoss": ("huber_loss",), "BinaryCrossEntropy": ("binary_cross_entropy",),
}


def called_as(op):
    """The names a script calls ``op`` (``SqrtBackward0``) by, or ()."""
    return _CALLED_AS.get(_SUFFIX.sub("", op or ""), ())


def line_calling(op, filename, near=None):
    """The Location of the one line of ``filename`` that calls ``op`` by name, or None. With ``near`` (the line of
    the backward that met the value): when several lines call it, the one inside the innermost loop around
    ``near`` (the training step made its loss there, not in an evaluation after the loop)."""
    names = called_as(op)
    if not names or not filename or filename.startswith("<"):
        return None
    alternatives = "|".join(map(re.escape, names))
    pattern = re.compile(rf"(?<![\w])(?:{alternatives})_?\s*\(")
    found = [number for number, text in enumerate(linecache.getlines(filename), start=1)
             if pattern.search(text.split("#", 1)[0])]
    if len(found) > 1 and near is not None:
        loop = _loop_around(filename, near)
        found = [n for n in found if loop is not None and loop[0] <= n <= loop[1]]
    if len(found) != 1:
        return None
    return Location(filename, found[0], _function_at(filename, found[0]))


def _loop_around(filename, line):
    """(first, last) line of the innermost ``for``/``while`` whose body holds ``line``, or None."""
    try:
        tree = ast.parse("".join(linecache.getlines(filename)))
    except (SyntaxError, ValueError):
        return None
    best = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While)) and node.lineno <= line <= (node.end_lineno or 0):
            if best is None or node.lineno >= best[0]:
                best = (node.lineno, node.end_lineno)
    return best


def _function_at(filename, line):
    """The name of the innermost function whose body holds ``line`` (``<module>`` outside any)."""
    try:
        tree = ast.parse("".join(linecache.getlines(filename)))
    except (SyntaxError, ValueError):
        return "<module>"
    name, start = "<module>", 0
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno >= start and \
                node.lineno <= line <= (node.end_lineno or node.lineno):
            name, start = node.name, node.lineno
    return name
