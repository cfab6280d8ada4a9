"""Elementwise functions of one tensor, and dtype casts."""

import numpy as np

from ..autograd.function import Function
from ..dtypes import default_float, result_type


def _floating(x):
    """PyTorch computes float functions of integer tensors in the default float dtype; numpy would use float64."""
    return x.astype(default_float()) if x.dtype.kind in "iub" else x


class Exp(Function):
    _raw = True

    @staticmethod
    def forward(ctx, x):
        out = np.asarray(np.exp(_floating(x)))  # an array even when 0-d: saved, it must be versioned
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return grad * out


class Log(Function):
    _raw = True

    @staticmethod
    def forward(ctx, x):
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(x)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.log(_floating(x))

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        with np.errstate(divide="ignore"):
            return grad / x


class Sqrt(Function):
    _raw = True

    @staticmethod
    def forward(ctx, x):
        with np.errstate(invalid="ignore"):
            out = np.asarray(np.sqrt(_floating(x)))
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        with np.errstate(divide="ignore"):
            return grad / (2 * out)


class Abs(Function):
    _raw = True

    @staticmethod
    def forward(ctx, x):
        if x.dtype.kind == "b":
            raise NotImplementedError("\"abs_cpu\" not implemented for 'Bool'")
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(x)
        return np.abs(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * np.sign(x)


class Sin(Function):
    _raw = True

    @staticmethod
    def forward(ctx, x):
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(x)
        return np.sin(_floating(x))

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * np.cos(x)


class Cos(Function):
    _raw = True

    @staticmethod
    def forward(ctx, x):
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(x)
        return np.cos(_floating(x))

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return -grad * np.sin(x)


class Tanh(Function):
    _raw = True

    @staticmethod
    def forward(ctx, x):
        out = np.asarray(np.tanh(_floating(x)))
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return grad * (1 - out * out)


class Sigmoid(Function):
    _raw = True

    @staticmethod
    def forward(ctx, x):
        x = _floating(x)
        # exp of a negative number only: no overflow warnings for large |x|.
        e = np.exp(-np.abs(x))
        out = np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return grad * out * (1 - out)


class Relu(Function):
    _raw = True

    @staticmethod
    def forward(ctx, x):
        out = np.asarray(np.maximum(x, 0, dtype=x.dtype))
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(out)  # PyTorch saves the result: relu_ on it is caught as a stale version
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return grad * (out > 0)


class Clamp(Function):
    _raw = True

    @staticmethod
    def forward(ctx, x, min=None, max=None):
        if min is None and max is None:
            raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(x)
        ctx._bounds = (min, max)
        ctx._meta = {"min": min, "max": max}
        # PyTorch promotes: an integer tensor clamped to a float bound is float.
        dtype = x.dtype if x.dtype.kind == "f" else result_type(*(v for v in (x, min, max) if v is not None))
        out = x
        if min is not None:
            out = np.maximum(out, min)
        if max is not None:
            out = np.minimum(out, max)
        return out.astype(dtype, copy=False) if out is not x else np.array(x, copy=True)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        lo, hi = ctx._bounds
        keep = np.ones(x.shape, dtype=bool)
        if lo is not None:
            keep &= x >= lo
        if hi is not None:
            keep &= x <= hi
        return grad * keep


class Cast(Function):
    """``to(dtype)``: differentiable between float dtypes; integer/bool results carry no gradient."""

    _raw = True

    @staticmethod
    def forward(ctx, x, dtype):
        ctx._meta = {"dtype": str(dtype)}
        return x.astype(dtype)

    @staticmethod
    def backward(ctx, grad):
        return grad  # the engine casts it back to the input's dtype
