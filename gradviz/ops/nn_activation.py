"""The activation functions of ``torch.nn`` beyond relu/sigmoid/tanh: GELU, SiLU, LeakyReLU, ELU, Softplus and
Hardtanh, each one node whose backward reads only its saved input (PyTorch saves the same)."""

import math

import numpy as np

from ..autograd.function import Function

_SQRT_HALF = math.sqrt(0.5)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_GELU_CUBIC = 0.044715


def erf(x):
    """The error function to double precision, vectorised: a positive-term series near 0 (no cancellation)
    and the continued fraction of erfc beyond |x| = 2.5. gradviz's engine has no public erf yet."""
    x = np.asarray(x, dtype=np.float64)
    a = np.abs(x)
    out = np.empty_like(a)
    near = a <= 2.5
    if near.any():
        z = a[near]
        term = z.copy()
        total = z.copy()
        z2 = 2.0 * z * z
        for n in range(1, 60):  # erf(z) = 2/sqrt(pi) exp(-z^2) sum 2^n z^(2n+1) / (2n+1)!!
            term = term * z2 / (2 * n + 1)
            total += term
        out[near] = 2.0 / math.sqrt(math.pi) * np.exp(-z * z) * total
    far = ~near
    if far.any():
        z = a[far]
        frac = np.zeros_like(z)
        for k in range(60, 0, -1):  # erfc(z) = exp(-z^2)/sqrt(pi) / (z + (1/2)/(z + 1/(z + (3/2)/(z + ...))))
            frac = (k / 2.0) / (z + frac)
        out[far] = 1.0 - np.exp(-z * z) / math.sqrt(math.pi) / (z + frac)
    return np.copysign(out, x)


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
