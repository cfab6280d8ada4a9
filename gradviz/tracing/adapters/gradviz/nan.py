"""Which op of a graph no full iteration recorded made a NaN/Inf, on gradviz's engine: read from what its nodes
saved for backward (as ``torch/nan`` does on PyTorch). Walked once, in the order the nodes were made: the first
node that saved a non-finite output made it; the first that saved a non-finite input got it from the op before it
(or from the data, when that input is a leaf); an op of the table below whose saved inputs are finite is
recomputed from them."""

import numpy as np

from ....autograd.function import AccumulateGrad
from ...data_origin import data_origin

_RECOMPUTE = {"Log": np.log, "Log2": np.log2, "Log10": np.log10, "Log1p": np.log1p, "Sqrt": np.sqrt,
              "Rsqrt": lambda x: 1 / np.sqrt(x), "Reciprocal": np.reciprocal, "Acos": np.arccos, "Asin": np.arcsin,
              "Atanh": np.arctanh, "Div": np.divide, "Lgamma": None}
WALK_LIMIT = 100_000


def nonfinite_culprit(root):
    """``(node, phase, data)``: phase "forward" (its output was not finite) or "input" (a value from outside the
    graph, the data, carried it: ``data`` is that saved Variable when known, else None); None when nothing saved
    tells."""
    nodes = _nodes(root)
    nodes.sort(key=lambda n: getattr(n, "_seq", 0))
    for node in nodes:
        saved = node._saved or ()
        bad_output = bad_input = False
        from_data = None
        for item in saved:
            data, kind = item[0], item[4]
            if isinstance(data, np.ndarray) and data.dtype.kind in "fc" and not np.isfinite(data).all():
                if kind == "output":
                    bad_output = True
                else:
                    bad_input = True
                    variable = getattr(item, "variable", None)
                    if from_data is None and variable is not None and not variable._requires_grad:
                        from_data = variable
        if bad_input:
            if from_data is not None:  # a saved input that needs no gradient: the data, not an op, carried it
                return node, "input", from_data
            producer = _producer(node)
            return (producer, "forward", None) if producer is not None else (node, "input", None)
        if bad_output or _recomputed_bad(node, saved):
            return node, "forward", None
    return None


def _nodes(root):
    found, pending, seen = [], [root], {id(root)}
    while pending and len(found) < WALK_LIMIT:
        node = pending.pop()
        if type(node) is not AccumulateGrad:
            found.append(node)
        for edge in node._next:
            child = None if edge is None else edge[0]
            if child is not None and id(child) not in seen:
                seen.add(id(child))
                pending.append(child)
    return found


def _producer(node):
    children = [e[0] for e in node._next if e is not None and e[0] is not None and type(e[0]) is not AccumulateGrad]
    return max(children, key=lambda c: getattr(c, "_seq", 0)) if children else None


def _recomputed_bad(node, saved):
    fn = _RECOMPUTE.get(type(node).__name__)
    inputs = [data for data, _, _, _, kind, _ in saved if kind != "output"]
    if fn is None or not inputs or not all(isinstance(x, np.ndarray) for x in inputs):
        return False
    with np.errstate(all="ignore"):
        try:
            out = fn(*inputs)
        except (TypeError, ValueError):
            return False
    return not np.isfinite(out).all()


def data_line(frame, variable):
    """``(name, Location)`` of the user's line that made ``variable`` (a saved input that came in with the data),
    or of a Variable over the same array; None when no user frame holds it."""
    if variable is None or frame is None:
        return None
    data = variable._data
    return data_origin(frame, variable, lambda other: other._data is data)
