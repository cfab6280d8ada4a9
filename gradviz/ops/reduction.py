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
    axes = tuple(sorted(_dim(d, ndim) for d in dims))
    return None if ndim == 0 else axes  # dim 0 or -1 of a 0-d tensor: its one element


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
            return _expand_back(grad, shape, axes, keepdim) * centered * np.divide(2.0, ctx._denom)


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



# ----- opsb: prod, cumulative ops, logsumexp, norm, std, amax/amin, all/any ----------------------------------
def _int_to_long(x, dtype):
    """PyTorch's accumulation dtype: an explicit ``dtype``, else int64 for integers and bools."""
    if dtype is not None:
        return x.astype(dtype, copy=False)
    return x.astype(np.int64) if x.dtype.kind in "iub" else x


def _exclusive_cumprod(x, axis, reverse=False):
    """Products of the elements strictly before each one along ``axis`` (strictly after, with ``reverse``)."""
    if reverse:
        return np.flip(_exclusive_cumprod(np.flip(x, axis), axis), axis)
    ones = np.ones_like(np.take(x, [0], axis=axis))
    return np.cumprod(np.concatenate([ones, np.take(x, np.arange(x.shape[axis] - 1), axis=axis)], axis=axis),
                      axis=axis)


class Prod(Function):
    """Product over all elements or one dim. Backward multiplies the products before and after each element,
    so zeros in the input get exact gradients (no division)."""

    _raw = True

    @staticmethod
    def forward(ctx, x, dim=None, keepdim=False, dtype=None):
        x = _int_to_long(x, dtype)
        ctx._in = (x.shape, dim, keepdim)
        ctx._meta = {"dim": dim, "keepdim": keepdim}
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(x)
        return np.asarray(np.prod(x, axis=dim, keepdims=keepdim))

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        shape, dim, keepdim = ctx._in
        if x.size == 0:
            return np.zeros(shape, dtype=grad.dtype)
        flat = x.reshape(-1) if dim is None else x
        axis = 0 if dim is None else dim
        others = _exclusive_cumprod(flat, axis) * _exclusive_cumprod(flat, axis, reverse=True)
        return (_expand_back(grad, shape, None if dim is None else (dim,), keepdim) * others.reshape(shape))


def prod(x, dim=None, keepdim=False, dtype=None):
    d = None if dim is None else _dim(dim, x._data.ndim)
    if x._data.ndim == 0:
        d = None  # dim 0 or -1 of a 0-d tensor: the product of its one element
    return Prod.apply(x, dim=d, keepdim=keepdim, dtype=dtype)


class Cumsum(Function):
    _raw = True

    @staticmethod
    def forward(ctx, x, dim, dtype=None):
        ctx._dim = dim
        ctx._meta = {"dim": dim}
        return np.cumsum(_int_to_long(x, dtype), axis=dim).reshape(x.shape)  # numpy makes a 0-d input 1-d

    @staticmethod
    def backward(ctx, grad):
        d = ctx._dim
        if grad.ndim == 0:
            return grad
        return np.flip(np.cumsum(np.flip(grad, d), axis=d), d)


class Cumprod(Function):
    """Backward: before the first zero of a slice, the usual sum(grad * out) / x; at that zero, the same sum with
    the zero taken out; after it, nothing (every product there contains the zero)."""

    _raw = True

    @staticmethod
    def forward(ctx, x, dim, dtype=None):
        x = _int_to_long(x, dtype)
        out = np.cumprod(x, axis=dim).reshape(x.shape)
        ctx._dim = dim
        ctx._meta = {"dim": dim}
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, grad):
        x, out = ctx.saved_tensors
        d = ctx._dim
        if x.ndim == 0 or x.size == 0:
            return grad

        def tail_sum(a):
            return np.flip(np.cumsum(np.flip(a, d), axis=d), d)

        zero = x == 0
        if not zero.any():
            return tail_sum(grad * out) / x
        n = x.shape[d]
        first = np.where(zero.any(axis=d, keepdims=True), np.argmax(zero, axis=d, keepdims=True), n)
        pos = np.arange(n).reshape((n,) + (1,) * (x.ndim - d - 1))
        before, at = pos < first, pos == first
        with np.errstate(divide="ignore", invalid="ignore"):
            g_before = tail_sum(grad * out) / np.where(before, x, 1)
        x_skip = np.where(at, np.ones_like(x), x)
        g_at = tail_sum(grad * np.cumprod(x_skip, axis=d))
        return np.where(before, g_before, np.where(at, g_at, 0)).astype(grad.dtype, copy=False)


def cumsum(x, dim, dtype=None):
    return Cumsum.apply(x, dim=_dim(dim, x._data.ndim), dtype=dtype)


def cumprod(x, dim, dtype=None):
    return Cumprod.apply(x, dim=_dim(dim, x._data.ndim), dtype=dtype)


class LogSumExp(Function):
    _raw = True

    @staticmethod
    def forward(ctx, x, dim, keepdim=False):
        if x.dtype.kind in "iub":
            x = x.astype(np.float32)
        m = np.max(x, axis=dim, keepdims=True) if x.size else np.zeros((1,) * x.ndim, x.dtype)
        m = np.where(np.isfinite(m), m, 0)
        with np.errstate(divide="ignore"):  # an empty or all -inf slice: -inf, as in PyTorch
            out = np.log(np.sum(np.exp(x - m), axis=dim, keepdims=True)) + m
        ctx._in = (x.shape, dim, keepdim)
        ctx._meta = {"dim": dim, "keepdim": keepdim}
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(x, out)
        return out if keepdim else np.squeeze(out, axis=dim)

    @staticmethod
    def backward(ctx, grad):
        x, out = ctx.saved_tensors
        shape, dim, keepdim = ctx._in
        return _expand_back(grad, shape, dim, keepdim) * np.exp(x - out)

    @classmethod
    def name(cls):
        return "LogsumexpBackward"


def logsumexp(x, dim, keepdim=False):
    return LogSumExp.apply(x, dim=_axes(dim, x._data.ndim) or tuple(range(x._data.ndim)), keepdim=keepdim)


class Norm(Function):
    """The vector p-norm over ``dim`` (all elements when None): p = 2 ('fro'), 1, inf, -inf, 0 or any other
    number. At a zero norm the gradient is 0, as in PyTorch."""

    _raw = True

    @staticmethod
    def forward(ctx, x, p, dim, keepdim=False):
        a = np.abs(x)
        if p == 2:
            out = np.sqrt(np.sum(x * x, axis=dim, keepdims=True))
        elif p == 1:
            out = np.sum(a, axis=dim, keepdims=True)
        elif p == np.inf:
            out = np.max(a, axis=dim, keepdims=True)
        elif p == -np.inf:
            out = np.min(a, axis=dim, keepdims=True)
        elif p == 0:
            out = np.sum(a != 0, axis=dim, keepdims=True).astype(x.dtype)
        else:
            out = np.sum(a ** p, axis=dim, keepdims=True) ** (1.0 / p)
        ctx._in = (x.shape, p, dim, keepdim)
        ctx._meta = {"p": p, "dim": dim, "keepdim": keepdim}
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(x, out)
        return out if keepdim else out.reshape(np.squeeze(out, axis=dim).shape)

    @staticmethod
    def backward(ctx, grad):
        x, out = ctx.saved_tensors
        shape, p, dim, keepdim = ctx._in
        g = _expand_back(grad, shape, dim, keepdim)
        with np.errstate(divide="ignore", invalid="ignore"):
            if p == 2:
                local = np.where(out == 0, 0, x / out)
            elif p == 1:
                local = np.sign(x)
            elif p in (np.inf, -np.inf):
                hit = np.abs(x) == out
                local = np.sign(x) * hit / np.sum(hit, axis=dim, keepdims=True)
            elif p == 0:
                local = np.zeros_like(x)
            else:
                local = np.where(out == 0, 0, x * np.abs(x) ** (p - 2) / out ** (p - 1))
        return g * local.astype(x.dtype, copy=False)

    @classmethod
    def name(cls):
        return "LinalgVectorNormBackward"


def norm(x, p="fro", dim=None, keepdim=False, dtype=None):
    from ..errors import DtypeError, UnsupportedError

    if x._data.dtype.kind not in "fc":
        raise DtypeError("linalg.vector_norm: Expected a floating point or complex tensor as input. Got "
                         f"{_torch_type_name(x._data.dtype)}")
    if p is None or p == "fro":
        p = 2
    elif isinstance(p, str):
        raise UnsupportedError(f"gradviz's norm supports p = 'fro', 1, 2, inf, -inf, 0 or a number (not {p!r})")
    p = float(p)
    nd = x._data.ndim
    axes = tuple(range(nd)) if dim is None else _axes(dim, nd)
    if x._data.size == 0 and p in (np.inf, -np.inf):
        raise RuntimeError(f"linalg.vector_norm cannot compute the {'inf' if p > 0 else '-inf'} norm on an empty "
                           "tensor because the operation does not have an identity")
    out = Norm.apply(x, p=p, dim=axes, keepdim=keepdim)
    return out if dtype is None else out.to(dtype)


def _torch_type_name(dtype):
    return {"float32": "Float", "float64": "Double", "int64": "Long", "int32": "Int", "bool": "Bool"}.get(
        str(dtype), str(dtype))


def check_var_dtype(x):
    if x._data.dtype.kind not in "fc":
        raise RuntimeError("std and var only support floating point and complex dtypes")


class Std(Function):
    """``std`` with a ``correction`` (Bessel's is 1); the gradient is 0 where the deviation is 0."""

    _raw = True

    @staticmethod
    def forward(ctx, x, dim=None, correction=1, keepdim=False):
        axes = _axes(dim, x.ndim)
        count = x.size if axes is None else int(np.prod([x.shape[a] for a in axes]))
        denom = max(count - correction, 0)
        centered = x - np.mean(x, axis=axes, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.sqrt(np.sum(centered * centered, axis=axes, keepdims=True) / x.dtype.type(denom))
        ctx._shape = (x.shape, axes, keepdim, denom)
        ctx._meta = {"dim": dim, "correction": correction}
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(x, out)
        return out if keepdim else out.reshape(np.sum(centered, axis=axes).shape)

    @staticmethod
    def backward(ctx, grad):
        x, out = ctx.saved_tensors
        shape, axes, keepdim, denom = ctx._shape
        centered = x - np.mean(x, axis=axes, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            local = np.where(out == 0, 0, centered / (out * denom))
        return _expand_back(grad, shape, axes, keepdim) * local.astype(x.dtype, copy=False)


class Amax(Function):
    """``amax``/``amin`` over dims; ties share the gradient evenly (PyTorch's rule)."""

    _raw = True

    @staticmethod
    def forward(ctx, x, dim, keepdim=False, mode="max"):
        if x.size == 0 and (dim is None or any(x.shape[d] == 0 for d in dim)):
            raise RuntimeError(f"a{mode}(): Expected reduction dim to be specified for input.numel() == 0. "
                               "Specify the reduction dim with the 'dim' argument.")
        out = (np.max if mode == "max" else np.min)(x, axis=dim, keepdims=True)
        ctx._in = (x.shape, dim, keepdim)
        ctx._meta = {"dim": dim, "keepdim": keepdim}
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(x, out)
        return out if keepdim else out.reshape(np.squeeze(out, axis=dim).shape if dim is not None else ())

    @staticmethod
    def backward(ctx, grad):
        x, out = ctx.saved_tensors
        shape, dim, keepdim = ctx._in
        hit = x == out
        return _expand_back(grad, shape, dim, keepdim) * hit / np.sum(hit, axis=dim, keepdims=True)


class Amin(Amax):
    @classmethod
    def name(cls):
        return "AminBackward"


def amax(x, dim=(), keepdim=False, mode="max"):
    nd = x._data.ndim
    axes = None if dim in ((), []) or dim is None or nd == 0 else _axes(dim, nd)
    return (Amax if mode == "max" else Amin).apply(x, dim=axes, keepdim=keepdim, mode=mode)


class AllAny(Function):
    """``all``/``any``: boolean results that never require grad."""

    _raw = True
    _differentiable = False

    @staticmethod
    def forward(ctx, x, dim=None, keepdim=False, mode="all"):
        ctx._meta = {"dim": dim, "mode": mode}
        out = np.asarray((np.all if mode == "all" else np.any)(x, axis=dim, keepdims=keepdim))
        return out.astype(np.uint8) if x.dtype == np.uint8 else out  # PyTorch keeps uint8 for uint8


def all_any(x, dim, keepdim, mode):
    return AllAny.apply(x, dim=_axes(dim, x._data.ndim), keepdim=keepdim, mode=mode)


__all__ = ["Sum", "Mean", "Var", "MaxAll", "MaxDim", "ArgMax", "Softmax", "LogSoftmax", "max_min",
           "arg_max_min", "Variable",
           "Prod", "Cumsum", "Cumprod", "LogSumExp", "Norm", "Std", "Amax", "Amin", "AllAny", "prod", "cumsum",
           "cumprod", "logsumexp", "norm", "amax", "all_any", "check_var_dtype"]
