"""Indexing (``x[i]``, ``x[i] = v``), selection (``where``), filling and copying, and comparisons."""

import numpy as np

from ..autograd.function import Function
from ..autograd.inplace import apply_inplace
from ..autograd.variable import Variable
from ..dtypes import promote_pair
from ..errors import DtypeError, ShapeError


def _convert_index(index):
    """Turn a PyTorch index into a numpy one (Variables become arrays); say whether it is basic."""
    parts = index if isinstance(index, tuple) else (index,)
    out = []
    basic = True
    for p in parts:
        if isinstance(p, Variable):
            p = p._data
            if p.dtype.kind not in "iub":
                raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        if isinstance(p, (list, np.ndarray)):
            p = np.asarray(p)
            if p.dtype.kind == "f":
                raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
            basic = False
        elif isinstance(p, (bool, np.bool_)):
            basic = False
        elif not (p is None or p is Ellipsis or isinstance(p, (slice, int, np.integer))):
            raise IndexError(f"only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables "
                             f"are valid indices (got {type(p).__name__})")
        out.append(p)
    if basic and Ellipsis not in out:
        out.append(Ellipsis)  # keeps x[0] a 0-d *view*, as in PyTorch, not a numpy scalar copy
    return tuple(out), basic


class Index(Function):
    """Basic indexing (ints, slices, None, ...): a view of the input."""

    _raw = True
    _view = True

    @staticmethod
    def view(array, index):
        return array[index]

    @staticmethod
    def forward(ctx, x, index):
        ctx._in = (x.shape, x.dtype)
        ctx._index = index
        ctx._meta = {"index": _index_text(index)}
        return x[index]

    @staticmethod
    def backward(ctx, grad):
        shape, dtype = ctx._in
        out = np.zeros(shape, dtype=grad.dtype)
        out[ctx._index] = grad
        return out


class IndexAdvanced(Function):
    """Advanced indexing (lists, integer or boolean tensors): a copy; repeated indices add up in backward."""

    _raw = True

    @staticmethod
    def forward(ctx, x, index):
        ctx._in = x.shape
        ctx._index = index
        ctx._meta = {"index": _index_text(index)}
        if ctx.needs_input_grad[0]:
            _save_index_arrays(ctx, index)
        out = x[index]
        # numpy may lay a gathered result out in Fortran order; PyTorch's is contiguous (so .view works on it).
        return out if out.flags.c_contiguous else np.ascontiguousarray(out)

    @staticmethod
    def backward(ctx, grad):
        out = np.zeros(ctx._in, dtype=grad.dtype)
        np.add.at(out, _saved_index(ctx), grad)
        return out

    @classmethod
    def name(cls):
        return "IndexBackward"


def _save_index_arrays(ctx, index):
    """Index arrays are saved for backward as PyTorch saves index tensors: they count as the graph's memory,
    and a second backward through a freed graph fails as it does in PyTorch."""
    ctx.save_for_backward(*(p for p in index if isinstance(p, np.ndarray)))


def _saved_index(ctx):
    arrays = iter(ctx.saved_tensors)
    return tuple(next(arrays) if isinstance(p, np.ndarray) else p for p in ctx._index)


def _index_text(index):
    parts = []
    for p in index:
        if p is Ellipsis:
            parts.append("...")
        elif isinstance(p, slice):
            parts.append(":".join("" if v is None else str(v) for v in (p.start, p.stop))
                         + ("" if p.step is None else f":{p.step}"))
        elif isinstance(p, np.ndarray):
            parts.append(f"<{p.dtype} {list(p.shape)}>")
        else:
            parts.append(repr(p))
    if parts and parts[-1] == "...":
        parts.pop()
    return "[" + ", ".join(parts) + "]"


def getitem(x, index):
    idx, basic = _convert_index(index)
    _check_bounds(x._data, idx)
    if basic:
        return Index.apply(x, index=idx)
    return IndexAdvanced.apply(x, index=idx)


def _check_bounds(array, idx):
    dim = 0
    for p in idx:
        if p is Ellipsis:
            return
        if p is None:
            continue
        if isinstance(p, (int, np.integer)) and not isinstance(p, bool):
            size = array.shape[dim] if dim < array.ndim else 0
            if dim >= array.ndim:
                raise IndexError(f"too many indices for tensor of dimension {array.ndim}")
            if not -size <= p < size:
                raise IndexError(f"index {p} is out of bounds for dimension {dim} with size {size}")
        dim += 1


class IndexPut(Function):
    """``x[index] = value``: used through the in-place path, which writes the result back into ``x``."""

    _raw = True

    @staticmethod
    def forward(ctx, x, value, index):
        ctx._index = index
        ctx._meta = {"index": _index_text(index)}
        if ctx.needs_input_grad[0] or ctx.needs_input_grad[1]:
            _save_index_arrays(ctx, index)
        out = np.array(x, copy=True)
        try:
            out[index] = value
        except ValueError as err:
            raise ShapeError(f"shape mismatch: value tensor of shape {list(np.shape(value))} cannot be broadcast "
                             f"to indexing result ({err})") from None
        return out

    @staticmethod
    def backward(ctx, grad):
        index = _saved_index(ctx)
        gx = None
        if ctx.needs_input_grad[0]:
            gx = np.array(grad, copy=True)
            gx[index] = 0
        gv = grad[index] if ctx.needs_input_grad[1] else None
        return gx, gv

    @classmethod
    def name(cls):
        return "IndexPutBackward"


def setitem(x, index, value):
    idx, basic = _convert_index(index)
    if not basic:
        apply_inplace(IndexPut, x, value, index=idx)
    elif _whole(idx):
        apply_inplace(Copy, x, value)
    else:
        # As PyTorch: x[0] = v is x[0].copy_(v), a write through a view (CopySlices in the graph; on a leaf,
        # the view-of-a-leaf error; overlap checked against the written region only).
        _check_bounds(x._data, idx)
        apply_inplace(Copy, Index.apply(x, index=idx), value)


def _whole(index):
    return all(p is Ellipsis or p == slice(None) for p in index)


class Fill(Function):
    """``fill_``/``zero_`` (and the random fills): the old values get no gradient."""

    _raw = True

    @staticmethod
    def forward(ctx, x, value):
        ctx._meta = {"value": value if np.isscalar(value) else "<array>"}
        if isinstance(value, Variable):
            value = value._data
        return np.broadcast_to(np.asarray(value, dtype=x.dtype), x.shape).copy()

    @staticmethod
    def backward(ctx, grad):
        return np.zeros_like(grad)


class Copy(Function):
    """``copy_(src)``: the target's old values get no gradient; ``src`` gets it (summed if broadcast)."""

    _raw = True

    @staticmethod
    def forward(ctx, x, src):
        try:
            return np.broadcast_to(src, x.shape).astype(x.dtype, copy=True)
        except ValueError:
            raise ShapeError(f"The size of tensor a ({x.shape[-1] if x.ndim else 1}) must match the size of "
                             f"tensor b ({np.shape(src)[-1] if np.ndim(src) else 1}) at non-singleton "
                             f"dimension {max(x.ndim - 1, 0)}") from None

    @staticmethod
    def backward(ctx, grad):
        return np.zeros_like(grad), grad


class Where(Function):
    _raw = True

    @staticmethod
    def forward(ctx, condition, a, b):
        cond = np.asarray(condition)
        if cond.dtype != np.bool_:
            raise DtypeError(f"where expected condition to be a boolean tensor, but got a tensor with dtype "
                             f"{_TYPE_NAMES.get(str(cond.dtype), cond.dtype)}")
        if ctx.needs_input_grad[1] or ctx.needs_input_grad[2]:
            ctx.save_for_backward(cond)
        return np.where(cond, *promote_pair(a, b))

    @staticmethod
    def backward(ctx, grad):
        (cond,) = ctx.saved_tensors
        zero = np.zeros((), dtype=grad.dtype)
        ga = np.where(cond, grad, zero) if ctx.needs_input_grad[1] else None
        gb = np.where(cond, zero, grad) if ctx.needs_input_grad[2] else None
        return None, ga, gb


_COMPARE = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal, "eq": np.equal,
            "ne": np.not_equal}


class Compare(Function):
    """Comparisons: boolean results that never require grad (the logical ops live in ``logical.py``)."""

    _raw = True
    _differentiable = False

    @staticmethod
    def forward(ctx, a, b, op):
        ctx._meta = {"op": op}
        return _COMPARE[op](*promote_pair(a, b))  # compared in the promoted dtype, as PyTorch does


_TYPE_NAMES = {"float32": "Float", "float64": "Double", "int64": "Long", "int32": "Int", "uint8": "Byte"}


def compare(a, b, op):
    if b is None or isinstance(b, (str, type)):
        return NotImplemented
    return Compare.apply(a, b, op=op)


def where(condition, a, b):
    return Where.apply(condition, a, b)


__all__ = ["Index", "IndexAdvanced", "IndexPut", "Fill", "Copy", "Where", "Compare", "getitem", "setitem",
           "compare", "where", "Variable"]
