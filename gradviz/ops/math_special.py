"""The pointwise math family of one tensor: trig and hyperbolic functions and their inverses, exp2/expm1,
log2/log10/log1p, rsqrt, reciprocal, rounding (floor, ceil, round, trunc, frac, sign), logit, erf/erfc/erfinv.

Each op names its value and its derivative side by side; ``FloatUnary`` holds the one forward/backward they
share. Integer and bool inputs are computed in the default float dtype, as PyTorch does. Rounding ops keep an
integer input's dtype and, like PyTorch's, pass a zero gradient.
"""

import math

import numpy as np

from ..autograd.function import Function
from ..dtypes import default_float


def _floating(x):
    return x.astype(default_float()) if x.dtype.kind in "iub" else x


class FloatUnary(Function):
    """``out = value(x)``; backward is ``grad * derivative(saved)``, where ``saved`` is the input or, for ops
    whose derivative is cheaper from the result (``saves = "output"``), the output — PyTorch's choice."""

    _raw = True
    saves = "input"

    @staticmethod
    def forward(ctx, x):
        x = _floating(x)
        with np.errstate(all="ignore"):
            out = np.asarray(ctx.value(x))
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(out if ctx.saves == "output" else x)
        return out

    @staticmethod
    def backward(ctx, grad):
        (saved,) = ctx.saved_tensors
        with np.errstate(all="ignore"):
            return grad * ctx.derivative(saved)


# ----- trigonometric, hyperbolic and their inverses ---------------------------------------------------------
class Tan(FloatUnary):
    saves = "output"
    value = staticmethod(np.tan)

    @staticmethod
    def derivative(out):
        return 1 + out * out


class Asin(FloatUnary):
    value = staticmethod(np.arcsin)

    @staticmethod
    def derivative(x):
        return 1 / np.sqrt(1 - x * x)


class Acos(FloatUnary):
    value = staticmethod(np.arccos)

    @staticmethod
    def derivative(x):
        return -1 / np.sqrt(1 - x * x)


class Atan(FloatUnary):
    value = staticmethod(np.arctan)

    @staticmethod
    def derivative(x):
        return 1 / (1 + x * x)


class Sinh(FloatUnary):
    value = staticmethod(np.sinh)
    derivative = staticmethod(np.cosh)


class Cosh(FloatUnary):
    value = staticmethod(np.cosh)
    derivative = staticmethod(np.sinh)


class Asinh(FloatUnary):
    value = staticmethod(np.arcsinh)

    @staticmethod
    def derivative(x):
        return 1 / np.sqrt(x * x + 1)


class Acosh(FloatUnary):
    value = staticmethod(np.arccosh)

    @staticmethod
    def derivative(x):
        return 1 / np.sqrt(x * x - 1)


class Atanh(FloatUnary):
    value = staticmethod(np.arctanh)

    @staticmethod
    def derivative(x):
        return 1 / (1 - x * x)


# ----- exponentials and logarithms ---------------------------------------------------------------------------
class Exp2(FloatUnary):
    saves = "output"
    value = staticmethod(np.exp2)

    @staticmethod
    def derivative(out):
        return out * math.log(2.0)


class Expm1(FloatUnary):
    saves = "output"
    value = staticmethod(np.expm1)

    @staticmethod
    def derivative(out):
        return out + 1


class Log2(FloatUnary):
    value = staticmethod(np.log2)

    @staticmethod
    def derivative(x):
        return 1 / (x * math.log(2.0))


class Log10(FloatUnary):
    value = staticmethod(np.log10)

    @staticmethod
    def derivative(x):
        return 1 / (x * math.log(10.0))


class Log1p(FloatUnary):
    value = staticmethod(np.log1p)

    @classmethod
    def name(cls):
        return "Log1PBackward"  # PyTorch's spelling

    @staticmethod
    def derivative(x):
        return 1 / (x + 1)


class Rsqrt(FloatUnary):
    saves = "output"

    @staticmethod
    def value(x):
        return 1 / np.sqrt(x)

    @staticmethod
    def derivative(out):
        return -0.5 * out * out * out


class Reciprocal(FloatUnary):
    saves = "output"

    @staticmethod
    def value(x):
        return 1 / x

    @staticmethod
    def derivative(out):
        return -out * out


class Logit(Function):
    """``log(x / (1 - x))``, with ``x`` first clamped to ``[eps, 1 - eps]`` when ``eps`` is given; outside that
    band the gradient is 0 (with eps) or NaN (without, outside [0, 1]), as in PyTorch."""

    _raw = True

    @staticmethod
    def forward(ctx, x, eps=None):
        x = _floating(x)
        ctx._eps = eps
        if eps is not None:
            ctx._meta = {"eps": eps}
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(x)
        z = x if eps is None else np.clip(x, eps, 1 - eps)
        with np.errstate(all="ignore"):
            return np.asarray(np.log(z / (1 - z)))

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        eps = ctx._eps
        with np.errstate(all="ignore"):
            g = grad / (x * (1 - x))
        if eps is None:
            return np.where((x < 0) | (x > 1), np.nan, g)
        return np.where((x < eps) | (x > 1 - eps), 0, g)


# ----- the error function ----------------------------------------------------------------------------------
_TWO_OVER_SQRT_PI = 2 / math.sqrt(math.pi)
_SERIES_LIMIT = 2.5  # below: the positive series (no cancellation); above: the continued fraction


def _erf_series(x):
    """erf(x) = 2/sqrt(pi) exp(-x^2) sum 2^n x^(2n+1) / (1*3*...*(2n+1)); 40 terms reach float64 for |x| < 2.5."""
    x2 = x * x
    term = x.copy()
    total = x.copy()
    for n in range(1, 40):
        term *= 2 * x2 / (2 * n + 1)
        total += term
    return _TWO_OVER_SQRT_PI * np.exp(-x2) * total


def _erfc_fraction(x):
    """erfc(x) for x >= 2.5 by its continued fraction exp(-x^2)/sqrt(pi) / (x + (1/2)/(x + 1/(x + (3/2)/...))),
    evaluated from 40 levels deep (float64-exact there)."""
    t = x.copy()
    for k in range(40, 0, -1):
        t = x + (k / 2) / t
    return _TWO_OVER_SQRT_PI / 2 * np.exp(-x * x) / t


def erfc_array(x):
    """erfc of a float array, computed in float64 and returned in the input's dtype."""
    a = np.abs(np.asarray(x, dtype=np.float64))
    out = np.empty_like(a)
    small = a < _SERIES_LIMIT
    out[small] = 1 - _erf_series(a[small])
    out[~small] = _erfc_fraction(a[~small])
    out = np.where(np.asarray(x) < 0, 2 - out, out)
    out[np.isnan(a)] = np.nan
    return out.astype(np.asarray(x).dtype, copy=False)


def erf_array(x):
    """erf of a float array, computed in float64 and returned in the input's dtype."""
    a = np.abs(np.asarray(x, dtype=np.float64))
    out = np.empty_like(a)
    small = a < _SERIES_LIMIT
    out[small] = _erf_series(a[small])
    out[~small] = 1 - _erfc_fraction(a[~small])
    out[np.isnan(a)] = np.nan
    return np.copysign(out, x).astype(np.asarray(x).dtype, copy=False)  # keeps erf(-0.0) == -0.0


def erfinv_array(y):
    """erfinv by Winitzki's closed-form estimate refined with Newton steps on erf (or on erfc near +-1, where
    erf's residual would cancel); computed in float64, returned in the input's dtype."""
    y64 = np.asarray(y, dtype=np.float64)
    a = np.abs(y64)
    with np.errstate(all="ignore"):
        log_term = np.log((1 - a) * (1 + a))
        c = 2 / (math.pi * 0.147) + log_term / 2
        x = np.sqrt(np.sqrt(c * c - log_term / 0.147) - c)
        tail = a > 0.5
        for _ in range(4):
            residual = np.where(tail, (1 - a) - erfc_array(x), erf_array(x) - a)  # both rise with x
            x = x - residual / (_TWO_OVER_SQRT_PI * np.exp(-x * x))
    x = np.where(a == 1, np.inf, np.where(a > 1, np.nan, x))
    return np.copysign(x, y64).astype(np.asarray(y).dtype, copy=False)


class Erf(FloatUnary):
    value = staticmethod(erf_array)

    @staticmethod
    def derivative(x):
        return _TWO_OVER_SQRT_PI * np.exp(-x * x)


class Erfc(FloatUnary):
    value = staticmethod(erfc_array)

    @staticmethod
    def derivative(x):
        return -_TWO_OVER_SQRT_PI * np.exp(-x * x)


class Erfinv(FloatUnary):
    saves = "output"
    value = staticmethod(erfinv_array)

    @staticmethod
    def derivative(out):
        return np.exp(out * out) / _TWO_OVER_SQRT_PI


# ----- rounding and sign: integer inputs keep their dtype, the gradient is zero -------------------------------
class Rounding(Function):
    """``value(x)`` with a zero gradient (PyTorch's FloorBackward and friends return zeros, not None)."""

    _raw = True

    @staticmethod
    def forward(ctx, x):
        if x.dtype.kind in "iu":
            return x.copy()  # already whole numbers
        _refuse_bool(x, ctx.value.__name__)
        return np.asarray(ctx.value(x))

    @staticmethod
    def backward(ctx, grad):
        return np.zeros_like(grad)


class Floor(Rounding):
    value = staticmethod(np.floor)


class Ceil(Rounding):
    value = staticmethod(np.ceil)


class Trunc(Rounding):
    value = staticmethod(np.trunc)


class Round(Function):
    """Half to even, as PyTorch's nearbyint; ``decimals`` scales by 10**decimals first (in the input's dtype)."""

    _raw = True

    @staticmethod
    def forward(ctx, x, decimals=0):
        if decimals:
            ctx._meta = {"decimals": decimals}
        if x.dtype.kind in "iu":
            return x.copy()
        _refuse_bool(x, "round")
        if not decimals:
            return np.asarray(np.rint(x))
        if decimals > 0:
            scale = x.dtype.type(10.0 ** decimals)
            return np.asarray(np.rint(x * scale) / scale)
        scale = x.dtype.type(10.0 ** -decimals)
        return np.asarray(np.rint(x / scale) * scale)

    @staticmethod
    def backward(ctx, grad):
        return np.zeros_like(grad)


class Sign(Function):
    _raw = True

    @staticmethod
    def forward(ctx, x):
        if x.dtype.kind == "b":
            return x.copy()
        out = np.asarray(np.sign(x))
        if x.dtype.kind == "f":
            out[np.isnan(x)] = 0  # PyTorch's sign is (0 < x) - (x < 0): 0 for NaN
        return out

    @staticmethod
    def backward(ctx, grad):
        return np.zeros_like(grad)


class Frac(Function):
    """``x - trunc(x)``: the gradient passes through unchanged."""

    _raw = True

    @staticmethod
    def forward(ctx, x):
        if x.dtype.kind not in "fc":
            raise NotImplementedError(f'"frac_cpu" not implemented for \'{_TYPE_NAMES.get(str(x.dtype), x.dtype)}\'')
        with np.errstate(invalid="ignore"):  # frac(inf) is NaN, silently as in PyTorch
            return np.asarray(x - np.trunc(x))

    @staticmethod
    def backward(ctx, grad):
        return grad


def _refuse_bool(x, name):
    if x.dtype.kind == "b":
        raise NotImplementedError(f'"{name}_vml_cpu" not implemented for \'Bool\'')


_TYPE_NAMES = {"float32": "Float", "float64": "Double", "int64": "Long", "int32": "Int", "bool": "Bool",
               "uint8": "Byte"}
