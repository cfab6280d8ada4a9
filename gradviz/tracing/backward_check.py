"""Check a custom ``Function``'s backward against its forward, numerically, on the inputs it was applied to.

Engine-neutral: an adapter hands in a ``ProbeEngine`` that knows how to copy inputs, run the Function and ask its
engine for a vector-Jacobian product; this module only does the arithmetic on numpy arrays.

The test is a random projection, not a Jacobian: for random ``u`` (one input's direction) and ``v`` (over the
outputs) it compares ``<J^T v, u>``, where ``J^T v`` is what backward returned, with ``<v, J u>`` from central
differences of forward. That is one backward and two extra forward calls per input, whatever the sizes, and a
gradient that is wrong anywhere shows up with high probability. A mismatch at the actual inputs is checked
again at a slightly moved point: a kink exactly at an input (ReLU at 0, ``abs``, ties in ``max``) disagrees
only there, a wrong formula disagrees everywhere.
"""

import inspect
import linecache
import zlib
from dataclasses import dataclass, field

import numpy as np

TRIALS = 2  # projections at the actual inputs (and again at each moved point of a re-check)
RECHECKS = 2  # moved points tried before a mismatch is reported
TOLERANCE = {"float64": 1e-4, "float32": 3e-2}
STEP = {"float64": 1e-6, "float32": 3e-3}  # finite-difference step, relative to the input's RMS
JITTER = 1e-2  # how far a re-check moves the inputs, relative to their RMS


@dataclass
class Mismatch:
    """What the check found wrong about one input's gradient."""

    index: int  # position among apply's positional arguments
    name: str | None  # the forward parameter's name, when it has one
    relative_error: float
    backward_value: float  # <J^T v, u> from backward
    numerical_value: float  # <v, J u> from central differences


@dataclass
class CheckResult:
    status: str  # "passed", "failed" or "skipped"
    reason: str | None = None  # why it was skipped, or a note ("a kink at the inputs")
    dtype: str | None = None  # the precision the probe ran in
    checked_inputs: list = field(default_factory=list)  # positions whose gradient was compared
    mismatch: Mismatch | None = None


class ProbeEngine:
    """What the check needs from an engine. Every call runs on copies; the adapter makes the probe quiet (no
    observers, output suppressed, random state restored before each forward)."""

    def differentiable(self, args):
        """Positions of the floating-point tensor arguments that required grad in the real call."""
        raise NotImplementedError

    def array(self, value):
        """A numpy copy of tensor argument ``value``."""
        raise NotImplementedError

    def forward(self, fn_class, args, kwargs, arrays, track):
        """Apply ``fn_class`` to copies of ``args`` where ``arrays`` (position -> array) replaces the values of
        the differentiable inputs; with ``track``, those copies are fresh leaves that require grad. Returns
        ``(outputs, leaves)``: the outputs as a tuple, the leaves as position -> engine tensor."""
        raise NotImplementedError

    def output_arrays(self, outputs, tracked):
        """Per output, a float numpy array, or None where it is not floating point (and, when ``tracked``, where
        it does not require grad: an output marked non-differentiable)."""
        raise NotImplementedError

    def vjp(self, outputs, leaves, cotangents):
        """Backward through ``outputs`` with ``cotangents`` (None where an output takes no part); returns
        position -> numpy gradient, or None where backward returned no gradient for that leaf."""
        raise NotImplementedError


def signature_of(args, kwargs, is_tensor, describe):
    """The key under which a Function is checked once: each argument's shape, dtype and requires_grad (tensors,
    via ``describe``) or type (anything else), and the keyword names."""
    parts = tuple(describe(a) if is_tensor(a) else type(a).__name__ for a in args)
    return parts + tuple(sorted(kwargs))


def describe_tensor(dtype, shape, requires_grad):
    """One tensor argument of a signature, as the report shows it: ``float32[4, 3] requires_grad``."""
    dims = ", ".join(str(int(d)) for d in shape)
    return f"{dtype}[{dims}]" + (" requires_grad" if requires_grad else "")


def definition_line(code):
    """The line of the ``def`` itself for a function's code (``co_firstlineno`` is its first decorator's)."""
    line = code.co_firstlineno
    for offset in range(20):
        text = linecache.getline(code.co_filename, line + offset).lstrip()
        if text.startswith(("def ", "async def ")):
            return line + offset
        if not text:
            break
    return line


def input_names(fn_class):
    """Positional parameter names of ``forward`` after ``ctx`` (None past a ``*args``)."""
    try:
        params = list(inspect.signature(fn_class.forward).parameters.values())[1:]
    except (TypeError, ValueError):
        return []
    names = []
    for p in params:
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
        else:
            break
    return names


def check_backward(engine, fn_class, args, kwargs):
    """Compare ``fn_class``'s backward with finite differences of its forward at ``args``."""
    positions = engine.differentiable(args)
    if not positions:
        return CheckResult("skipped", "no input requires grad")
    base = {p: engine.array(args[p]) for p in positions}
    dtype = "float64" if all(a.dtype == np.float64 for a in base.values()) else _upcast_ok(engine, fn_class,
                                                                                           args, kwargs, base)
    point = {p: a.astype(np.float64 if dtype == "float64" else a.dtype) for p, a in base.items()}
    rng = np.random.default_rng(zlib.crc32(fn_class.__qualname__.encode()))
    first = _probe(engine, fn_class, args, kwargs, point, dtype, rng)
    if isinstance(first, CheckResult):
        first.dtype = dtype
        return first
    bad, checked = first
    if bad is None:
        return CheckResult("passed", None, dtype, checked)
    for _ in range(RECHECKS):  # a kink at the inputs, or a wrong formula?
        moved = {p: _jitter(a, rng) for p, a in point.items()}
        again = _probe(engine, fn_class, args, kwargs, moved, dtype, rng)
        if isinstance(again, CheckResult) or again[0] is None:
            return CheckResult("passed", "disagreed only at the inputs themselves (a kink there)", dtype, checked)
    bad.name = _name_at(fn_class, bad.index)
    return CheckResult("failed", None, dtype, checked, bad)


def _probe(engine, fn_class, args, kwargs, point, dtype, rng):
    """TRIALS random projections at ``point``: ``(worst mismatch or None, checked positions)``, or a skip."""
    tol = TOLERANCE[dtype]
    worst = None
    checked = []
    for _ in range(TRIALS):
        outputs, leaves = engine.forward(fn_class, args, kwargs, point, track=True)
        outs = engine.output_arrays(outputs, tracked=True)
        if all(o is None for o in outs):
            return CheckResult("skipped", "no output requires grad")
        if not all(np.all(np.isfinite(o)) for o in outs if o is not None):
            return CheckResult("skipped", "forward gave NaN or Inf at these inputs")
        vs = [None if o is None else rng.standard_normal(o.shape).astype(o.dtype) for o in outs]
        grads = engine.vjp(outputs, leaves, vs)
        checked = [p for p in point if grads.get(p) is not None]
        for p in checked:
            x = point[p]
            u = rng.standard_normal(x.shape).astype(x.dtype)
            h = STEP[dtype] * _rms(x)
            plus = _dot_outputs(engine, fn_class, args, kwargs, {**point, p: x + h * u}, vs)
            minus = _dot_outputs(engine, fn_class, args, kwargs, {**point, p: x - h * u}, vs)
            numerical = (plus - minus) / (2 * h)
            g = np.asarray(grads[p], dtype=np.float64)
            analytical = float(np.sum(g * u))
            if not (np.isfinite(numerical) and np.isfinite(analytical)):
                return CheckResult("skipped", "NaN or Inf in the gradients at these inputs")
            # Relative to the larger of the two, floored by the projection's natural size (|g| |u|) so that
            # two values near zero by chance do not make round-off look like an error.
            floor = 1e-3 * float(np.linalg.norm(g) * np.linalg.norm(u))
            error = abs(analytical - numerical) / max(abs(analytical), abs(numerical), floor, 1e-30)
            if error > tol and (worst is None or error > worst.relative_error):
                worst = Mismatch(p, None, error, analytical, numerical)
    return worst, checked


def _dot_outputs(engine, fn_class, args, kwargs, arrays, vs):
    outputs, _ = engine.forward(fn_class, args, kwargs, arrays, track=False)
    total = 0.0
    for o, v in zip(engine.output_arrays(outputs, tracked=False), vs):
        if v is not None and o is not None:
            total += float(np.sum(np.asarray(o, dtype=np.float64) * v))
    return total


def _upcast_ok(engine, fn_class, args, kwargs, base):
    """Probe in float64 when the Function computes in float64 given float64 inputs (most do), else in the
    inputs' precision with a tolerance for its round-off."""
    wide = {p: a.astype(np.float64) for p, a in base.items()}
    try:
        outputs, _ = engine.forward(fn_class, args, kwargs, wide, track=False)
        arrays = engine.output_arrays(outputs, tracked=False)
    except Exception:
        return "float32"
    floats = [a for a in arrays if a is not None]
    return "float64" if floats and all(a.dtype == np.float64 for a in floats) else "float32"


def _rms(x):
    r = float(np.sqrt(np.mean(np.square(x, dtype=np.float64)))) if x.size else 0.0
    return r if r > 0 else 1.0


def _jitter(x, rng):
    return (x + JITTER * _rms(x) * rng.uniform(-1.0, 1.0, x.shape)).astype(x.dtype)


def _name_at(fn_class, index):
    names = input_names(fn_class)
    return names[index] if index < len(names) else None
