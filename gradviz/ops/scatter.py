"""Index-driven selection and accumulation along one dim: gather, scatter, scatter_add, index_select, index_add
and take_along_dim. The index tensors are inputs that never receive gradients; they are saved for backward (as
PyTorch saves them), so changing one in place before backward is caught."""

import numpy as np

from ..autograd.function import Function
from ..autograd.variable import Variable
from ..errors import DtypeError, ShapeError
from .shape import Clone, _dim


def _torch_name(dtype):
    return {"float32": "Float", "float64": "Double", "int64": "Long", "int32": "Int", "bool": "Bool"}.get(
        str(dtype), str(dtype))


def _check_index(index, op):
    if index.dtype.kind not in "iu":
        raise DtypeError(f"{op}(): Expected dtype int32/int64 for index")


def _check_bounds(index, size, dim):
    """PyTorch's gather, scatter and index_add take no negative indices."""
    if index.size:
        bad = index[(index < 0) | (index >= size)]
        if bad.size:
            raise RuntimeError(f"index {int(bad.reshape(-1)[0])} is out of bounds for dimension {dim} with size "
                               f"{size}")


def _along(index, dim):
    """The full numpy index addressing ``index``'s positions, with ``index`` itself along ``dim``."""
    if index.ndim == 0:
        return (index,)
    grids = list(np.ogrid[tuple(slice(n) for n in index.shape)])
    grids[dim] = index
    return tuple(grids)


def _check_gather_shapes(x_shape, index, dim, other="self"):
    if len(index.shape) != len(x_shape) and not (index.ndim <= 1 and len(x_shape) <= 1):
        raise ShapeError("Index tensor must have the same number of dimensions as input tensor")
    for k, (n, m) in enumerate(zip(index.shape, x_shape)):
        if k != dim and n > m:
            raise ShapeError(f"Size does not match at dimension {k} expected index {list(index.shape)} to be no "
                             f"larger than {other} {list(x_shape)} apart from dimension {dim}")


class Gather(Function):
    """``out[i][j] = x[i][index[i][j]]`` (for dim=1); backward adds each gradient back where it was taken."""

    _raw = True

    @staticmethod
    def forward(ctx, x, index, dim):
        ctx._in = (x.shape, dim)
        ctx._meta = {"dim": dim}
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(index)
        return np.asarray(x[_along(index, dim)])

    @staticmethod
    def backward(ctx, grad):
        (index,) = ctx.saved_tensors
        shape, dim = ctx._in
        out = np.zeros(shape, dtype=grad.dtype)
        np.add.at(out, _along(index, dim), grad)
        return out, None


def gather(x, dim, index):
    idx = index._data if isinstance(index, Variable) else np.asarray(index)
    _check_index(idx, "gather")
    shape = x._data.shape
    d = _dim(dim, len(shape))
    _check_gather_shapes(shape, idx, d)
    _check_bounds(idx, shape[d] if shape else 1, d)
    return Gather.apply(x, index, dim=d)


class Scatter(Function):
    """``scatter(dim, index, src)``: a copy of ``x`` with ``src``'s values written at ``index`` (``src`` may be a
    number). The overwritten places of ``x`` get no gradient; ``src`` gets the gradient of where it landed."""

    _raw = True

    @staticmethod
    def forward(ctx, x, index, src, dim):
        where = _along(index, dim)
        ctx._dim = dim
        ctx._src_shape = np.shape(src)
        ctx._meta = {"dim": dim}
        if ctx.needs_input_grad[0] or ctx.needs_input_grad[2]:
            ctx.save_for_backward(index)
        out = np.array(x, copy=True)
        out[where] = src[tuple(slice(n) for n in index.shape)] if np.ndim(src) else src
        return out

    @staticmethod
    def backward(ctx, grad):
        (index,) = ctx.saved_tensors
        where = _along(index, ctx._dim)
        gx = gsrc = None
        if ctx.needs_input_grad[0]:
            gx = np.array(grad, copy=True)
            gx[where] = 0
        if ctx.needs_input_grad[2]:
            gsrc = _pad_to(grad[where], ctx._src_shape)
        return gx, None, gsrc


def _pad_to(values, shape):
    """``values`` placed at the start of a zero array of ``shape`` (src may be larger than the index)."""
    if values.shape == tuple(shape):
        return values
    out = np.zeros(shape, dtype=values.dtype)
    out[tuple(slice(n) for n in values.shape)] = values
    return out


class ScatterAdd(Function):
    """``scatter_add(dim, index, src)``: ``src``'s values added into a copy of ``x`` at ``index``."""

    _raw = True

    @staticmethod
    def forward(ctx, x, index, src, dim):
        ctx._dim = dim
        ctx._src_shape = src.shape
        ctx._meta = {"dim": dim}
        if ctx.needs_input_grad[2]:
            ctx.save_for_backward(index)
        out = np.array(x, copy=True)
        np.add.at(out, _along(index, dim), src[tuple(slice(n) for n in index.shape)])
        return out

    @staticmethod
    def backward(ctx, grad):
        gsrc = None
        if ctx.needs_input_grad[2]:
            (index,) = ctx.saved_tensors
            gsrc = _pad_to(grad[_along(index, ctx._dim)], ctx._src_shape)
        return grad, None, gsrc


def check_scatter(x, dim, index, src, op):
    idx = index._data if isinstance(index, Variable) else np.asarray(index)
    _check_index(idx, op)
    shape = x._data.shape
    d = _dim(dim, len(shape))
    _check_gather_shapes(shape, idx, d)
    if isinstance(src, Variable):
        if src._data.dtype != x._data.dtype:
            raise DtypeError(f"{op}(): Expected self.dtype to be equal to src.dtype")
        for k, (n, m) in enumerate(zip(idx.shape, src._data.shape)):
            if n > m:
                raise ShapeError(f"Size does not match at dimension {k} expected index {list(idx.shape)} to be no "
                                 f"larger than src {list(src._data.shape)} apart from dimension {d}")
    _check_bounds(idx, shape[d] if shape else 1, d)
    return d


def scatter(x, dim, index, src=None, value=None, reduce=None):
    if reduce is not None:
        from ..errors import UnsupportedError

        raise UnsupportedError(f"gradviz's scatter does not support reduce={reduce!r} (use scatter_add)")
    src = value if src is None else src
    if src is None:
        raise TypeError("scatter() missing 1 required positional argument: 'src' or 'value'")
    d = check_scatter(x, dim, index, src, "scatter")
    return Scatter.apply(x, index, src, dim=d)


def scatter_add(x, dim, index, src):
    d = check_scatter(x, dim, index, src, "scatter")
    return ScatterAdd.apply(x, index, src, dim=d)


class IndexSelect(Function):
    _raw = True

    @staticmethod
    def forward(ctx, x, index, dim):
        ctx._in = (x.shape, dim)
        ctx._meta = {"dim": dim}
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(index)
        return np.take(x, index, axis=dim)

    @staticmethod
    def backward(ctx, grad):
        (index,) = ctx.saved_tensors
        shape, dim = ctx._in
        out = np.zeros(shape, dtype=grad.dtype)
        np.add.at(out, (slice(None),) * dim + (index,), grad)
        return out, None


def _vector_index(index, op):
    idx = index._data if isinstance(index, Variable) else np.asarray(index)
    if idx.dtype.kind not in "iu":
        if op == "index_add_":
            raise DtypeError(f"index_add_(): Expected dtype int32/int64 for index but got: "
                             f"{_torch_name(idx.dtype)}")
        raise DtypeError(f"{op}(): Expected dtype int32 or int64 for index")
    if idx.ndim > 1:
        raise IndexError(f"{op}(): Index is supposed to be a vector")
    return idx


def index_select(x, dim, index):
    idx = _vector_index(index, "index_select")
    shape = x._data.shape
    d = _dim(dim, len(shape))
    size = shape[d] if shape else 1
    bad = idx[(idx < 0) | (idx >= size)]
    if bad.size:
        raise RuntimeError(f"INDICES element is out of DATA bounds, id={int(bad.reshape(-1)[0])} axis_dim={size}")
    if not shape:
        if idx.size != 1:
            raise RuntimeError(f"index_select(): Index to scalar can have only 1 value, got {idx.size} value(s)")
        return Clone.apply(x)  # the one element, copied as PyTorch does
    if idx.ndim == 0:
        index = idx.reshape(1)
    return IndexSelect.apply(x, index, dim=d)


class IndexAdd(Function):
    """``index_add(dim, index, source, alpha)``: ``alpha * source``'s slices added into a copy of ``x``."""

    _raw = True

    @staticmethod
    def forward(ctx, x, index, source, dim, alpha):
        ctx._dim = dim
        ctx._alpha = alpha
        ctx._meta = {"dim": dim, "alpha": alpha}
        if ctx.needs_input_grad[2]:
            ctx.save_for_backward(index)
        out = np.array(x, copy=True)
        np.add.at(out, (slice(None),) * dim + (index,), source * alpha if alpha != 1 else source)
        return out

    @staticmethod
    def backward(ctx, grad):
        gsrc = None
        if ctx.needs_input_grad[2]:
            (index,) = ctx.saved_tensors
            gsrc = np.take(grad, index, axis=ctx._dim)
            if ctx._alpha != 1:
                gsrc = gsrc * ctx._alpha
        return grad, None, gsrc


def index_add(x, dim, index, source, alpha=1):
    return IndexAdd.apply(x, index, source, dim=check_index_add(x, dim, index, source), alpha=alpha)


def check_index_add(x, dim, index, source):
    """Validate ``index_add``'s arguments as PyTorch does; returns the normalised dim."""
    idx = _vector_index(index, "index_add_")
    shape = x._data.shape
    d = _dim(dim, len(shape))
    src = source._data if isinstance(source, Variable) else np.asarray(source)
    if src.dtype != x._data.dtype:
        raise DtypeError(f"index_add_(): self ({_torch_name(x._data.dtype)}) and source "
                         f"({_torch_name(src.dtype)}) must have the same scalar type")
    if src.shape[:d] + src.shape[d + 1:] != shape[:d] + shape[d + 1:] and src.ndim:
        raise ShapeError(f"source tensor shape must match self tensor shape, excluding the specified dimension. "
                         f"Got self.shape = {list(shape)} source.shape = {list(src.shape)}")
    if idx.reshape(-1).shape[0] != (src.shape[d] if src.ndim else 1):
        raise ShapeError(f"index_add_(): Number of indices ({idx.size}) should be equal to source.size(dim): "
                         f"({src.shape[d] if src.ndim else 1}), for dim: {d}")
    _check_bounds(idx, shape[d] if shape else 1, d)
    return d


def take_along_dim(x, indices, dim=None):
    if not isinstance(indices, Variable):
        indices = Variable(np.asarray(indices))
    idx = indices._data
    if idx.dtype.kind not in "iu":
        raise DtypeError("torch.take_along_dim(): dtype of indices should be Long but got "
                         f"{_torch_name(idx.dtype)}")
    if dim is None:
        flat = x.reshape(-1)
        return gather(flat, 0, indices.reshape(-1))
    nd = x._data.ndim
    if idx.ndim != nd:
        raise ShapeError(f"torch.take_along_dim(): input and indices should have the same number of dimensions, "
                         f"but got {nd} dimensions for input, and {idx.ndim} dimensions for indices")
    d = _dim(dim, nd)
    x_shape, i_shape = list(x._data.shape), list(idx.shape)
    x_shape[d] = i_shape[d] = 1
    for k in range(nd - 1, -1, -1):
        if x_shape[k] != i_shape[k] and 1 not in (x_shape[k], i_shape[k]):
            raise ShapeError(f"The size of tensor a ({x_shape[k]}) must match the size of tensor b ({i_shape[k]}) "
                             f"at non-singleton dimension {k}")
    common = list(np.broadcast_shapes(tuple(x_shape), tuple(i_shape)))
    x_target = common.copy()
    x_target[d] = x._data.shape[d]
    i_target = common.copy()
    i_target[d] = idx.shape[d]
    if tuple(x_target) != x._data.shape:
        x = x.expand(*x_target)
    idx = np.broadcast_to(idx, i_target)
    return gather(x, d, Variable(np.ascontiguousarray(idx)) if idx.shape != indices._data.shape else indices)



def one_hot(tensor, num_classes=-1):
    """``nn.functional.one_hot``: int64 class indices to int64 one-hot rows (a new last dim)."""
    labels = tensor._data if isinstance(tensor, Variable) else np.asarray(tensor)
    if labels.dtype != np.int64:
        raise DtypeError("one_hot is only applicable to index tensor of type LongTensor.")
    if labels.size and labels.min() < 0:
        raise RuntimeError("Class values must be non-negative.")
    if num_classes == -1:
        if not labels.size:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        num_classes = int(labels.max()) + 1
    elif labels.size and labels.max() >= num_classes:
        raise RuntimeError("Class values must be smaller than num_classes.")
    out = np.zeros(labels.shape + (int(num_classes),), dtype=np.int64)
    np.put_along_axis(out, labels[..., None], 1, axis=-1)
    return Variable(out)


__all__ = ["Gather", "Scatter", "ScatterAdd", "IndexSelect", "IndexAdd", "gather", "scatter", "scatter_add",
           "check_scatter", "index_select", "index_add", "check_index_add", "take_along_dim", "one_hot", "Variable"]
