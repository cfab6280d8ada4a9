"""Sorting along a dim: sort, argsort, topk. Values are differentiable (each gradient goes back to the place its
value came from); indices are int64 tensors that never require grad."""

import numpy as np

from ..autograd.function import Function
from .reduction import MinMaxResult
from .shape import _dim


class SortResult(MinMaxResult):
    """``torch.return_types.sort``: ``(values, indices)`` with names."""

    _type_name = "sort"

    def __repr__(self):
        return f"torch.return_types.{self._type_name}(\nvalues={self[0]!r},\nindices={self[1]!r})"


class TopkResult(SortResult):
    _type_name = "topk"


def _order(x, dim, descending):
    """Stable ordering indices along ``dim``; descending keeps ties in their original order and puts NaN first,
    as PyTorch does."""
    if not descending:
        return np.argsort(x, axis=dim, kind="stable")
    n = x.shape[dim]
    reversed_order = np.argsort(np.flip(x, dim), axis=dim, kind="stable")
    return (n - 1) - np.flip(reversed_order, dim)


class Sort(Function):
    _raw = True

    @staticmethod
    def forward(ctx, x, dim, descending, k=None):
        if x.ndim == 0:
            order = np.zeros((), dtype=np.int64)
            values = x.copy()
        else:
            order = _order(x, dim, descending)
            if k is not None:
                order = np.take(order, np.arange(k), axis=dim)
            values = np.take_along_axis(x, order, axis=dim)
        order = order.astype(np.int64, copy=False)
        ctx._in = (x.shape, dim)
        ctx._meta = {"dim": dim, "descending": descending} if k is None else {"k": k, "dim": dim,
                                                                             "largest": descending}
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(order)
        ctx.mark_non_differentiable(order)
        return values, order

    @staticmethod
    def backward(ctx, grad, _grad_indices):
        (order,) = ctx.saved_tensors
        shape, dim = ctx._in
        out = np.zeros(shape, dtype=grad.dtype)
        if out.ndim == 0:
            return grad
        np.put_along_axis(out, order, grad, axis=dim)
        return out


class Topk(Sort):
    @classmethod
    def name(cls):
        return "TopkBackward"


class Argsort(Function):
    _raw = True
    _differentiable = False

    @staticmethod
    def forward(ctx, x, dim, descending):
        ctx._meta = {"dim": dim, "descending": descending}
        if x.ndim == 0:
            return np.zeros((), dtype=np.int64)
        return _order(x, dim, descending).astype(np.int64, copy=False)


def sort(x, dim=-1, descending=False, stable=False):
    d = _dim(dim, x._data.ndim)
    return SortResult(Sort.apply(x, dim=d, descending=bool(descending)))


def argsort(x, dim=-1, descending=False, stable=False):
    return Argsort.apply(x, dim=_dim(dim, x._data.ndim), descending=bool(descending))


def topk(x, k, dim=-1, largest=True, sorted=True):
    d = _dim(dim, x._data.ndim)
    size = x._data.shape[d] if x._data.ndim else 1
    k = int(k)
    if x._data.dtype == np.bool_:
        raise RuntimeError("topk does not support bool dtypes on CPU")
    if not 0 <= k <= size:
        raise RuntimeError("selected index k out of range")
    return TopkResult(Topk.apply(x, dim=d, descending=bool(largest), k=k))


__all__ = ["Sort", "Topk", "Argsort", "SortResult", "TopkResult", "sort", "argsort", "topk"]
