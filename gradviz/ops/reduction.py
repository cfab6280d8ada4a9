"""Reductions (sum, mean, var, max/min) and the normalisers built on them (softmax, log_softmax)."""

import numpy as np

from ..autograd.function import Function
from ..autograd.variable import Variable
from .shape import _dim


def _axes(dim, ndim):
    """numpy axis tuple for a PyTorch ``dim`` (None, an int, or a sequence of ints)."""
    if dim is None:
        return None
    dims = dim if isinstance(dim, (tuple, list)) else (dim,)
    return tuple(sorted(_dim(d, ndim) for d in dims))


def _expand_back(grad, in_shape, axes, keepdim):
    """Reshape a reduced gradient so it broadcasts against the input again."""
    if axes is None:
        return np.broadcast_to(grad.reshape((1,) * len(in_shape)), in_shape)
    if not keepdim:
        grad = np.expand_dims(grad, axes)
    return np.broadcast_to(grad, in_shape)


def _sum_dtype(x):
    # PyTorch sums integers and bools into int64.
    return np.int64 if x.dtype.kind in "iub" else None


class Sum(Function):
    _raw = True

    @staticmethod
    def forward(ctx, x, dim=None, keepdim=False):
        axes = _axes(dim, x.ndim)
        ctx._shape = (x.shape, axes, keepdim)
        ctx._meta = {"dim": dim, "keepdim": keepdim}
        return np.sum(x, axis=axes, keepdims=keepdim, dtype=_sum_dtype(x))

    @staticmethod
    def backward(ctx, grad):
        shape, axes, keepdim = ctx._shape
        return _expand_back(grad, shape, axes, keepdim)


class Mean(Function):
    _raw = True

    @staticmethod
    def forward(ctx, x, dim=None, keepdim=False):
        if x.dtype.kind in "iub":
            raise RuntimeError("mean(): could not infer output dtype. Input dtype must be either a floating "
                               f"point or complex dtype. Got: {str(x.dtype).capitalize()}")
        axes = _axes(dim, x.ndim)
        ctx._shape = (x.shape, axes, keepdim)
        ctx._meta = {"dim": dim, "keepdim": keepdim}
        count = x.size if axes is None else int(np.prod([x.shape[a] for a in axes]))
        ctx._count = count
        return np.mean(x, axis=axes, keepdims=keepdim)

    @staticmethod
    def backward(ctx, grad):
        shape, axes, keepdim = ctx._shape
        return _expand_back(grad / ctx._count, shape, axes, keepdim)


class Var(Function):
    _raw = True

    @staticmethod
    def forward(ctx, x, dim=None, correction=1, keepdim=False):
        axes = _axes(dim, x.ndim)
        ctx._shape = (x.shape, axes, keepdim)
        ctx._meta = {"dim": dim, "correction": correction}
        count = x.size if axes is None else int(np.prod([x.shape[a] for a in axes]))
        ctx._denom = max(count - correction, 0)
        centered = x - np.mean(x, axis=axes, keepdims=True)
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(x)  # the input, as PyTorch saves it: an in-place change to it is caught
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.sum(centered * centered, axis=axes, keepdims=keepdim) / x.dtype.type(ctx._denom)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        shape, axes, keepdim = ctx._shape
        centered = x - np.mean(x, axis=axes, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            return _expand_back(grad, shape, axes, keepdim) * centered * (2.0 / ctx._denom)


class MaxAll(Function):
    """max()/min() over every element; ties share the gradient evenly (PyTorch's rule)."""

    _raw = True

    @staticmethod
    def forward(ctx, x, mode="max"):
        if x.size == 0:
            raise RuntimeError(f"{mode}(): Expected reduction dim to be specified for input.numel() == 0. "
                               "Specify the reduction dim with the 'dim' argument.")
        out = np.asarray(np.max(x) if mode == "max" else np.min(x))
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(x, out)  # input and result, as PyTorch saves them
        ctx._meta = {"mode": mode}
        return out

    @staticmethod
    def backward(ctx, grad):
        x, out = ctx.saved_tensors
        mask = x == out
        return grad * mask / np.count_nonzero(mask)

    @classmethod
    def name(cls):
        return "MaxBackward"


class MaxDim(Function):
    """max/min along a dim: returns (values, indices); the gradient goes to the first extremal index."""

    _raw = True

    @staticmethod
    def forward(ctx, x, dim, keepdim=False, mode="max"):
        d = _dim(dim, x.ndim)
        idx = np.argmax(x, axis=d) if mode == "max" else np.argmin(x, axis=d)
        idx = np.expand_dims(idx, d)
        values = np.take_along_axis(x, idx, axis=d)
        ctx._info = (x.shape, d, keepdim)
        ctx._meta = {"dim": dim, "keepdim": keepdim, "mode": mode}
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(idx)
        if not keepdim:
            values, idx = np.squeeze(values, d), np.squeeze(idx, d)
        indices = idx.astype(np.int64)
        ctx.mark_non_differentiable(indices)
        return values, indices

    @staticmethod
    def backward(ctx, grad, _grad_indices):
        (idx,) = ctx.saved_tensors
        shape, d, keepdim = ctx._info
        out = np.zeros(shape, dtype=grad.dtype)
        np.put_along_axis(out, idx, grad if keepdim else np.expand_dims(grad, d), axis=d)
        return out

    @classmethod
    def name(cls):
        return "MaxBackward"


class MinMaxResult(tuple):
    """``torch.return_types.max``: a (values, indices) pair with names."""

    @property
    def values(self):
        return self[0]

    @property
    def indices(self):
        return self[1]


class MinAll(MaxAll):
    @classmethod
    def name(cls):
        return "MinBackward"


class MinDim(MaxDim):
    @classmethod
    def name(cls):
        return "MinBackward"


def max_min(x, dim, keepdim, mode):
    if dim is None:
        return (MaxAll if mode == "max" else MinAll).apply(x, mode=mode)
    return MinMaxResult((MaxDim if mode == "max" else MinDim).apply(x, dim=dim, keepdim=keepdim, mode=mode))


def arg_max_min(x, dim, keepdim, mode):
    """argmax/argmin: integer results, no gradient (a non-differentiable op)."""
    return ArgMax.apply(x, dim=dim, keepdim=keepdim, mode=mode)


class ArgMax(Function):
    _raw = True
    _differentiable = False

    @staticmethod
    def forward(ctx, x, dim=None, keepdim=False, mode="max"):
        find = np.argmax if mode == "max" else np.argmin
        ctx._meta = {"dim": dim, "mode": mode}
        if dim is None:
            out = np.asarray(find(x))
            return out.reshape((1,) * x.ndim) if keepdim else out
        d = _dim(dim, x.ndim)
        return find(x, axis=d, keepdims=keepdim).astype(np.int64)

    @classmethod
    def name(cls):
        return "ArgMaxBackward"


def _shift(x, d):
    return x - np.max(x, axis=d, keepdims=True)


class Softmax(Function):
    _raw = True

    @staticmethod
    def forward(ctx, x, dim):
        d = _dim(dim, x.ndim)
        ctx._dim = d
        ctx._meta = {"dim": dim}
        e = np.exp(_shift(x, d))
        out = e / np.sum(e, axis=d, keepdims=True)
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        gy = grad * out
        return gy - out * np.sum(gy, axis=ctx._dim, keepdims=True)


class LogSoftmax(Function):
    _raw = True

    @staticmethod
    def forward(ctx, x, dim):
        d = _dim(dim, x.ndim)
        ctx._dim = d
        ctx._meta = {"dim": dim}
        shifted = _shift(x, d)
        out = shifted - np.log(np.sum(np.exp(shifted), axis=d, keepdims=True))
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return grad - np.exp(out) * np.sum(grad, axis=ctx._dim, keepdims=True)


__all__ = ["Sum", "Mean", "Var", "MaxAll", "MaxDim", "ArgMax", "Softmax", "LogSoftmax", "max_min",
           "arg_max_min", "Variable"]
