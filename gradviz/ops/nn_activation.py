"""The activation functions of ``torch.nn`` beyond relu/sigmoid/tanh: GELU, SiLU, LeakyReLU, ELU, Softplus and
Hardtanh, each one node whose backward reads only its saved input (PyTorch saves the same)."""

import math

import numpy as np

from ..autograd.function import Function
from .math_special import erf_array as erf

_SQRT_HALF = math.sqrt(0.5)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_GELU_CUBIC = 0.044715


def _like(value, x):
    return np.asarray(value, dtype=x.dtype)


class Gelu(Function):
    """``x * Phi(x)`` (the Gaussian CDF), or with ``approximate='tanh'`` the tanh approximation."""

    _raw = True

    @staticmethod
    def forward(ctx, x, approximate="none"):
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(x)
        ctx._approximate = approximate
        ctx._meta = {"approximate": approximate}
        if approximate == "tanh":
            inner = _SQRT_2_OVER_PI * (x + _GELU_CUBIC * x * x * x)
            return _like(0.5 * x * (1.0 + np.tanh(inner)), x)
        return _like(0.5 * x * (1.0 + erf(x * _SQRT_HALF)), x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        if ctx._approximate == "tanh":
            t = np.tanh(_SQRT_2_OVER_PI * (x + _GELU_CUBIC * x * x * x))
            d_inner = _SQRT_2_OVER_PI * (1.0 + 3.0 * _GELU_CUBIC * x * x)
            return _like(grad * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * d_inner), x)
        cdf = 0.5 * (1.0 + erf(x * _SQRT_HALF))
        pdf = _INV_SQRT_2PI * np.exp(-0.5 * x * x)
        return _like(grad * (cdf + x * pdf), x)


def _sigmoid(x):
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x))


class Silu(Function):
    """``x * sigmoid(x)``."""

    _raw = True

    @staticmethod
    def forward(ctx, x):
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(x)
        return x * _sigmoid(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        s = _sigmoid(x)
        return grad * s * (1 + x * (1 - s))


class LeakyRelu(Function):
    _raw = True

    @staticmethod
    def forward(ctx, x, negative_slope=0.01):
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(x)
        ctx._slope = negative_slope
        ctx._meta = {"negative_slope": negative_slope}
        return np.where(x > 0, x, x * x.dtype.type(negative_slope))

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return np.where(x > 0, grad, grad * grad.dtype.type(ctx._slope))


class Elu(Function):
    """``x`` where positive, ``alpha * (exp(x) - 1)`` elsewhere."""

    _raw = True

    @staticmethod
    def forward(ctx, x, alpha=1.0):
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(x)
        ctx._alpha = alpha
        ctx._meta = {"alpha": alpha}
        return np.where(x > 0, x, x.dtype.type(alpha) * np.expm1(np.minimum(x, 0)))

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return np.where(x > 0, grad, grad * x.dtype.type(ctx._alpha) * np.exp(np.minimum(x, 0)))


class Softplus(Function):
    """``log(1 + exp(beta x)) / beta``, and ``x`` itself where ``beta x > threshold`` (as PyTorch)."""

    _raw = True

    @staticmethod
    def forward(ctx, x, beta=1.0, threshold=20.0):
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(x)
        ctx._params = (beta, threshold)
        ctx._meta = {"beta": beta, "threshold": threshold}
        bx = x * x.dtype.type(beta)
        soft = (np.maximum(bx, 0) + np.log1p(np.exp(-np.abs(bx)))) / x.dtype.type(beta)
        return np.where(bx > threshold, x, soft).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        beta, threshold = ctx._params
        bx = x * x.dtype.type(beta)
        return np.where(bx > threshold, grad, grad * _sigmoid(bx)).astype(grad.dtype, copy=False)


class Hardtanh(Function):
    """``x`` clamped to ``[min_val, max_val]``; the gradient is 1 strictly inside, 0 elsewhere (PyTorch's)."""

    _raw = True

    @staticmethod
    def forward(ctx, x, min_val=-1.0, max_val=1.0):
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(x)
        ctx._bounds = (min_val, max_val)
        ctx._meta = {"min_val": min_val, "max_val": max_val}
        return np.clip(x, min_val, max_val).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        lo, hi = ctx._bounds
        return np.where((x > lo) & (x < hi), grad, 0).astype(grad.dtype, copy=False)


# ----- the smaller activations: each a function and its derivative of the saved input ------------------------
class _Pointwise(Function):
    """An activation ``y = f(x)`` whose backward is ``grad * f'(x)``; subclasses define ``f`` and ``df``
    (keyword parameters reach both)."""

    _raw = True

    @classmethod
    def forward(cls, ctx, x, **params):
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(x)
        ctx._params = params
        if params:
            ctx._meta = dict(params)
        return np.asarray(cls.f(x, **params), dtype=x.dtype)

    @classmethod
    def backward(cls, ctx, grad):
        (x,) = ctx.saved_tensors
        return np.asarray(grad * cls.df(x, **ctx._params), dtype=grad.dtype)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


class Selu(_Pointwise):
    @staticmethod
    def f(x):
        return _SELU_SCALE * np.where(x > 0, x, _SELU_ALPHA * np.expm1(np.minimum(x, 0)))

    @staticmethod
    def df(x):
        return _SELU_SCALE * np.where(x > 0, 1.0, _SELU_ALPHA * np.exp(np.minimum(x, 0)))


class Celu(_Pointwise):
    @staticmethod
    def f(x, alpha=1.0):
        return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0) / alpha))

    @staticmethod
    def df(x, alpha=1.0):
        return np.where(x > 0, 1.0, np.exp(np.minimum(x, 0) / alpha))


def _softplus(x):
    return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


class Mish(_Pointwise):
    """``x * tanh(softplus(x))``."""

    @staticmethod
    def f(x):
        return x * np.tanh(_softplus(x))

    @staticmethod
    def df(x):
        t = np.tanh(_softplus(x))
        return t + x * _sigmoid(x) * (1 - t * t)


class Hardswish(_Pointwise):
    """``x * relu6(x + 3) / 6``; PyTorch's derivative is ``x / 3 + 1/2`` on [-3, 3]."""

    @staticmethod
    def f(x):
        return x * np.clip(x + 3, 0, 6) / 6

    @staticmethod
    def df(x):
        return np.where(x < -3, 0.0, np.where(x <= 3, x / 3 + 0.5, 1.0))


class Hardsigmoid(_Pointwise):
    @staticmethod
    def f(x):
        return np.clip(x + 3, 0, 6) / 6

    @staticmethod
    def df(x):
        return np.where((x > -3) & (x < 3), 1.0 / 6, 0.0)


class LogSigmoid(_Pointwise):
    """``-softplus(-x)``, stable for large |x|."""

    @staticmethod
    def f(x):
        return -_softplus(-x)

    @staticmethod
    def df(x):
        return _sigmoid(-x)


class Softsign(_Pointwise):
    @staticmethod
    def f(x):
        return x / (1 + np.abs(x))

    @staticmethod
    def df(x):
        return 1 / (1 + np.abs(x)) ** 2


class Tanhshrink(_Pointwise):
    @staticmethod
    def f(x):
        return x - np.tanh(x)

    @staticmethod
    def df(x):
        return np.tanh(x) ** 2


class Threshold(_Pointwise):
    """``x`` where ``x > threshold``, ``value`` elsewhere."""

    @staticmethod
    def f(x, threshold=0.0, value=0.0):
        return np.where(x > threshold, x, value)

    @staticmethod
    def df(x, threshold=0.0, value=0.0):
        return (x > threshold).astype(x.dtype)


class Prelu(Function):
    """``x`` where positive, ``weight * x`` elsewhere; one learnable slope per channel (dim 1) or one shared."""

    _raw = True

    @staticmethod
    def forward(ctx, x, weight):
        w = _channel_view(weight, x.ndim)
        if any(ctx.needs_input_grad):
            ctx.save_for_backward(x, weight)
        return np.where(x > 0, x, w * x).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        need = ctx.needs_input_grad
        gx = gw = None
        if need[0]:
            gx = np.where(x > 0, grad, _channel_view(weight, x.ndim) * grad)
        if need[1]:
            contrib = np.where(x > 0, 0, x * grad)
            axes = tuple(a for a in range(x.ndim) if not (weight.size > 1 and a == 1))
            gw = contrib.sum(axis=axes).reshape(weight.shape)
        return gx, gw


def _channel_view(weight, ndim):
    if weight.size == 1 or ndim < 2:
        return weight.reshape(())
    return weight.reshape((1, -1) + (1,) * (ndim - 2))
