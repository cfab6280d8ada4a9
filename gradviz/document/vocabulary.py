"""The words a trace document is written in, defined once for the tracer that writes them and for the
diagnostics and renderers that read them (docs/trace-format.md).

Engines name the same things differently (PyTorch's ``MulBackward0`` is gradviz's ``MulBackward``, its
``torch::autograd::AccumulateGrad`` gradviz's ``AccumulateGrad``). A document keeps each ``op`` as the engine
named it, because that is what the user knows and what the pictures show; rules compare ``op_name(...)``, the
normalised name, so they hold for either engine.
"""

import re

# -- where a Variable came from (a Variable record's ``origin``) ------------------------------------------------
ORIGINS = {
    "op": "an op's output",
    "new": "a constructor (`tensor`, `Variable(...)`, `from_numpy`)",
    "factory": "a factory (`zeros`, `randn`…)",
    "data": "`.data` of another Variable",
    "detach": "`detach()` of another Variable",
    "numpy": "a numpy round trip",
    "parameter": "an `nn.Parameter`",
    "grad": "a `.grad` made by backward",
    "external": "made before the trace started, first seen as an input",
}
# Origins that cut a value out of the graph its source belongs to.
CUT_ORIGINS = ("data", "detach", "numpy")

# -- severities, most severe first ------------------------------------------------------------------------------
SEVERITIES = ("error", "warning", "info")


def severity_rank(severity):
    """How severe ``severity`` is, for comparing and sorting: error 3, warning 2, info 1, anything else 0."""
    try:
        return len(SEVERITIES) - SEVERITIES.index(severity)
    except ValueError:
        return 0


# -- errors a backward (or the script) raised -> the diagnostic code that explains them -------------------------
# By exception type: gradviz's classes (PyTorch raises a plain RuntimeError for all of them).
ERROR_CODES = {
    "NonScalarBackwardError": "nonscalar-backward",
    "NoGradFnError": "no-requires-grad",
    "GraphFreedError": "graph-freed",
    "StaleVersionError": "stale-version",
    "LeafInplaceError": "leaf-inplace",
}
# By message: PyTorch's wording, which gradviz's errors keep, so a real-PyTorch error is recognised too.
ERROR_MESSAGES = (
    ("grad can be implicitly created only for scalar outputs", "nonscalar-backward"),
    ("does not require grad and does not have a grad_fn", "no-requires-grad"),
    ("backward through the graph a second time", "graph-freed"),
    ("modified by an inplace operation", "stale-version"),
    ("leaf variable that requires grad is being used in an in-place operation", "leaf-inplace"),
    ("view of a leaf variable that requires grad is being used in an in-place operation", "leaf-inplace"),
    ("can't optimize a non-leaf tensor", "optimize-non-leaf"),  # an optimizer's ValueError (gradviz's too)
    # DistributedDataParallel's reducer, at the forward after a backward that left some parameter without a gradient
    ("expected to have finished reduction in the prior iteration", "ddp-unused-parameters"),
)


def error_code(error):
    """The diagnostic code for an error: an exception, or an error record ``{"type", "message", "code"?}``;
    None when no code explains it."""
    if not error:
        return None
    if isinstance(error, BaseException):
        error = {"type": type(error).__name__, "message": str(error)}
    if error.get("code") in ERROR_CODES.values():
        return error["code"]
    if error.get("type") in ERROR_CODES:
        return ERROR_CODES[error["type"]]
    message = str(error.get("message") or "").lower()
    for text, code in ERROR_MESSAGES:
        if text in message:
            return code
    return None


# -- op names ----------------------------------------------------------------------------------------------------
ACCUMULATE_GRAD = "AccumulateGrad"
# In-place ops that reset a tensor's values (``p.grad.zero_()``, ``fill_(0)``): PyTorch's ZeroBackward0 /
# FillBackward0…3, gradviz's FillBackward (its zero_ is a fill).
RESET_OPS = frozenset({"ZeroBackward", "FillBackward"})

_NAMESPACE = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_]*::)+")
_OVERLOAD = re.compile(r"(Backward)\d+$")


def normalise_op(name):
    """The engine-neutral name of a node or in-place op: C++ namespaces dropped and PyTorch's overload number
    after ``Backward`` removed (``MulBackward0`` -> ``MulBackward``, ``torch::autograd::AccumulateGrad`` ->
    ``AccumulateGrad``). gradviz's own names are already normal; None stays None."""
    if not name:
        return name
    try:
        return _NORMALISED[name]
    except (KeyError, TypeError):  # (TypeError: a name that is not a string, as a hand-written document may hold)
        pass
    normal = _OVERLOAD.sub(r"\1", _NAMESPACE.sub("", name))
    if len(_NORMALISED) < 4096:  # a run has a few hundred op names; the diagnostics ask for them ~100,000 times
        _NORMALISED[name] = normal
    return normal


_NORMALISED = {}  # name -> normalise_op(name): two regular expressions each time cost 30% of a long run's diagnostics


def op_name(record):
    """The normalised ``op`` of a node or event record (None when it has none)."""
    return normalise_op((record or {}).get("op"))


def is_accumulate_grad(node):
    """Whether a node record is a leaf's gradient accumulator (what a leaf's ``.grad`` is written by)."""
    return op_name(node) == ACCUMULATE_GRAD


def is_reset_op(record):
    """Whether an in-place event's op resets the values it writes (zero_, fill_), whichever engine named it."""
    return op_name(record) in RESET_OPS
