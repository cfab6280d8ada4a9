"""Shape ops. View ops (``_view = True``) return numpy views, so the output shares storage and — through the
engine — the version counter of its input; each defines ``view(array, **params)`` so an in-place write through
a view can be replayed on a gradient (see ``CopySlices``)."""

import numpy as np

from ..autograd.function import Function
from ..autograd.variable import Variable
from ..errors import ShapeError


def _dim(dim, ndim):
    """Normalise a possibly negative dim, with PyTorch's error for one out of range."""
    lo, hi = -max(ndim, 1), max(ndim, 1) - 1
    if not lo <= dim <= hi:
        raise IndexError(f"Dimension out of range (expected to be in range of [{lo}, {hi}], but got {dim})")
    return dim % max(ndim, 1)


class Reshape(Function):
    """``view``/``reshape``: a view when numpy can reshape without copying."""

    _raw = True
    _view = True

    @staticmethod
    def view(array, shape):
        return array.reshape(shape)

    @staticmethod
    def forward(ctx, x, shape):
        ctx._meta = {"shape": tuple(shape)}
        ctx._in_shape = x.shape
        return x.reshape(shape)

    @staticmethod
    def backward(ctx, grad):
        return grad.reshape(ctx._in_shape)


def _resolve_shape(x, shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    shape = tuple(int(s) for s in shape)
    size = x._data.size
    if shape.count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred")
    known = 1
    for s in shape:
        if s != -1:
            known *= s
    if (-1 in shape and (known == 0 or size % known)) or (-1 not in shape and known != size):
        raise ShapeError(f"shape '[{', '.join(str(s) for s in shape)}]' is invalid for input of size {size}")
    return shape


def view(x, shape):
    shape = _resolve_shape(x, shape)
    try:
        out = np.reshape(x._data, shape, copy=False)
    except ValueError:
        raise RuntimeError("view size is not compatible with input tensor's size and stride (at least one "
                           "dimension spans across two contiguous subspaces). Use .reshape(...) instead.") from None
    del out
    return Reshape.apply(x, shape=shape)


def reshape(x, shape):
    return Reshape.apply(x, shape=_resolve_shape(x, shape))


def flatten(x, start_dim=0, end_dim=-1):
    nd = x._data.ndim
    if nd == 0:
        return Reshape.apply(x, shape=(1,))
    s, e = _dim(start_dim, nd), _dim(end_dim, nd)
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if s == e:
        return x  # PyTorch returns the input itself when there is nothing to merge
    shape = x._data.shape
    return Reshape.apply(x, shape=shape[:s] + (int(np.prod(shape[s:e + 1])),) + shape[e + 1:])


class Transpose(Function):
    _raw = True
    _view = True

    @staticmethod
    def view(array, dim0, dim1):
        return np.swapaxes(array, dim0, dim1)

    @staticmethod
    def forward(ctx, x, dim0, dim1):
        nd = x.ndim
        ctx._dims = (_dim(dim0, nd), _dim(dim1, nd))
        ctx._meta = {"dim0": dim0, "dim1": dim1}
        return np.swapaxes(x, dim0, dim1) if nd else x

    @staticmethod
    def backward(ctx, grad):
        d0, d1 = ctx._dims
        return np.swapaxes(grad, d0, d1) if grad.ndim else grad


class Permute(Function):
    _raw = True
    _view = True

    @staticmethod
    def view(array, dims):
        return np.transpose(array, dims)

    @staticmethod
    def forward(ctx, x, dims):
        if len(dims) != x.ndim:
            raise RuntimeError(f"permute(sparse_coo): number of dimensions in the tensor input does not match "
                               f"the length of the desired ordering of dimensions i.e. input.dim() = {x.ndim} "
                               f"is not equal to len(dims) = {len(dims)}")
        dims = tuple(_dim(d, x.ndim) for d in dims)
        ctx._dims = dims
        ctx._meta = {"dims": dims}
        return np.transpose(x, dims)

    @staticmethod
    def backward(ctx, grad):
        return np.transpose(grad, np.argsort(ctx._dims))


class Squeeze(Function):
    _raw = True
    _view = True

    @staticmethod
    def view(array, dim):
        return _squeeze(array, dim)

    @staticmethod
    def forward(ctx, x, dim):
        ctx._in_shape = x.shape
        ctx._meta = {"dim": dim}
        return _squeeze(x, dim)

    @staticmethod
    def backward(ctx, grad):
        return grad.reshape(ctx._in_shape)


def _squeeze(array, dim):
    if dim is None:
        return np.squeeze(array)
    if array.ndim == 0:
        return array
    dims = dim if isinstance(dim, (tuple, list)) else (dim,)
    dims = tuple(d for d in (_dim(d, array.ndim) for d in dims) if array.shape[d] == 1)
    return np.squeeze(array, axis=dims) if dims else array


class Unsqueeze(Function):
    _raw = True
    _view = True

    @staticmethod
    def view(array, dim):
        return np.expand_dims(array, _dim(dim, array.ndim + 1))

    @staticmethod
    def forward(ctx, x, dim):
        ctx._in_shape = x.shape
        ctx._meta = {"dim": dim}
        return np.expand_dims(x, _dim(dim, x.ndim + 1))

    @staticmethod
    def backward(ctx, grad):
        return grad.reshape(ctx._in_shape)


class Expand(Function):
    """A broadcast view; backward sums over the expanded dims (the engine's unbroadcast)."""

    _raw = True
    _view = True

    @staticmethod
    def view(array, shape):
        return _broadcast_view(array, shape)

    @staticmethod
    def forward(ctx, x, shape):
        ctx._meta = {"shape": shape}
        return _broadcast_view(x, shape)

    @staticmethod
    def backward(ctx, grad):
        return grad


def _broadcast_view(array, shape):
    """np.broadcast_to, but writable when the source is, as PyTorch's expand is: fill_/zero_ may write through it
    (every other in-place op refuses overlapping memory, in apply_inplace)."""
    if not array.flags.writeable:
        return np.broadcast_to(array, shape)
    lead = len(shape) - array.ndim
    strides = (0,) * lead + tuple(0 if have == 1 and want != 1 else st
                                  for have, want, st in zip(array.shape, shape[lead:], array.strides))
    return np.lib.stride_tricks.as_strided(array, shape=shape, strides=strides)


def expand(x, sizes):
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    shape = x._data.shape
    if len(sizes) < len(shape):
        raise RuntimeError(f"expand(torch.FloatTensor{{[{', '.join(map(str, shape))}]}}, size=[{len(sizes)}]): "
                           "the number of sizes provided must be greater or equal to the number of dimensions "
                           "in the tensor")
    padded = (1,) * (len(sizes) - len(shape)) + shape
    target = []
    for want, have in zip(sizes, padded):
        want = int(want)
        if want == -1:
            want = have
        elif have != 1 and want != have:
            raise ShapeError(f"The expanded size of the tensor ({want}) must match the existing size ({have}) "
                             f"at non-singleton dimension {len(target)}.  Target sizes: {list(sizes)}.  Tensor "
                             f"sizes: {list(shape)}")
        target.append(want)
    return Expand.apply(x, shape=tuple(target))


class Clone(Function):
    _raw = True

    @staticmethod
    def forward(ctx, x):
        return np.array(x, copy=True)

    @staticmethod
    def backward(ctx, grad):
        return grad


class Cat(Function):
    _raw = True

    @staticmethod
    def forward(ctx, *xs, dim=0):
        arrays = [np.asarray(x) for x in xs]
        nd = arrays[0].ndim
        if nd == 0:
            raise RuntimeError("zero-dimensional tensor (at position 0) cannot be concatenated")
        d = _dim(dim, nd)
        for i, a in enumerate(arrays):
            if a.ndim != nd or a.shape[:d] + a.shape[d + 1:] != arrays[0].shape[:d] + arrays[0].shape[d + 1:]:
                raise ShapeError(f"Sizes of tensors must match except in dimension {d}. Expected size "
                                 f"{arrays[0].shape} but got size {a.shape} for tensor number {i} in the list.")
        ctx._splits = np.cumsum([a.shape[d] for a in arrays])[:-1]
        ctx._dim = d
        ctx._meta = {"dim": d}
        return np.concatenate(arrays, axis=d)

    @staticmethod
    def backward(ctx, grad):
        return tuple(np.split(grad, ctx._splits, axis=ctx._dim))


class Stack(Function):
    _raw = True

    @staticmethod
    def forward(ctx, *xs, dim=0):
        arrays = [np.asarray(x) for x in xs]
        for i, a in enumerate(arrays):
            if a.shape != arrays[0].shape:
                raise ShapeError(f"stack expects each tensor to be equal size, but got {list(arrays[0].shape)} "
                                 f"at entry 0 and {list(a.shape)} at entry {i}")
        d = _dim(dim, arrays[0].ndim + 1)
        ctx._dim = d
        ctx._meta = {"dim": d}
        return np.stack(arrays, axis=d)

    @staticmethod
    def backward(ctx, grad):
        return tuple(np.moveaxis(grad, ctx._dim, 0))


def cat(tensors, dim=0):
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("torch.cat(): expected a non-empty list of Tensors")
    return Cat.apply(*tensors, dim=dim)


def stack(tensors, dim=0):
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    return Stack.apply(*tensors, dim=dim)


__all__ = ["Reshape", "Transpose", "Permute", "Squeeze", "Unsqueeze", "Expand", "Clone", "Cat", "Stack",
           "view", "reshape", "flatten", "expand", "cat", "stack", "Variable"]
