"""``isclose``, ``nonzero``, ``unique`` and ``meshgrid``, with PyTorch's semantics.

``isclose``, ``nonzero`` and ``unique`` produce masks, indices and distinct values: new tensors that are not
part of any graph (PyTorch cannot differentiate ``unique`` either: its backward raises). ``meshgrid`` is built
from ``reshape`` and ``expand``, so gradients flow back to its inputs.
"""

import numpy as np

from ..autograd.variable import Variable

_TYPE_NAMES = {"float32": "Float", "float64": "Double", "int64": "Long", "int32": "Int", "bool": "Bool",
               "uint8": "Byte"}


def _type_name(dtype):
    return _TYPE_NAMES.get(str(dtype), str(dtype))


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Elementwise ``|input - other| <= atol + rtol * |other|`` (infinities equal only to themselves)."""
    if not isinstance(other, Variable):
        raise TypeError(f"isclose(): argument 'other' (position 2) must be Tensor, not {type(other).__name__}")
    a, b = input._data, other._data
    if a.dtype != b.dtype:
        raise RuntimeError(f"{_type_name(a.dtype)} did not match {_type_name(b.dtype)}")
    if rtol < 0:
        raise RuntimeError(f"rtol must be greater than or equal to zero, but got {rtol}")
    if atol < 0:
        raise RuntimeError(f"atol must be greater than or equal to zero, but got {atol}")
    if a.dtype == np.bool_:
        return Variable(np.broadcast_arrays(a == b)[0].copy())
    with np.errstate(invalid="ignore", over="ignore"):
        return Variable(np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan))


def nonzero(input, *, as_tuple=False):
    """Indices of the non-zero elements: an ``(n, ndim)`` int64 tensor, or one index tensor per dimension."""
    data = input._data
    if as_tuple:
        if data.ndim == 0:  # PyTorch treats a 0-dim tensor as one element of a 1-dim one here
            return (Variable(np.flatnonzero(data.reshape(1)).astype(np.int64)),)
        return tuple(Variable(idx.astype(np.int64)) for idx in np.nonzero(data))
    if data.ndim == 0:
        return Variable(np.zeros((int(bool(data)), 0), dtype=np.int64))
    return Variable(np.argwhere(data).astype(np.int64))


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct values (or distinct slices along ``dim``), in ascending order; ``sorted=False`` sorts too,
    as PyTorch's CPU kernel does."""
    data = input._data
    if dim is None:
        values, inverse, counts = np.unique(data.reshape(-1), return_inverse=True, return_counts=True)
        inverse = inverse.reshape(data.shape)
    else:
        if data.ndim == 0:
            raise IndexError(f"Dimension out of range (expected to be in range of [-1, 0], but got {dim})")
        d = dim + data.ndim if dim < 0 else dim
        if not 0 <= d < data.ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-data.ndim}, {data.ndim - 1}]"
                             f", but got {dim})")
        values, inverse, counts = np.unique(data, return_inverse=True, return_counts=True, axis=d)
        inverse = inverse.reshape(-1)
    out = Variable(np.ascontiguousarray(values))
    if not (return_inverse or return_counts):
        return out
    extra = []
    if return_inverse:
        extra.append(Variable(inverse.astype(np.int64)))
    if return_counts:
        extra.append(Variable(counts.astype(np.int64)))
    return (out, *extra)


def meshgrid(*tensors, indexing=None):
    """Coordinate grids from 1-D (or 0-dim) tensors; ``indexing='ij'`` (the default) or ``'xy'`` (Cartesian:
    the first two dimensions swapped), built as the 'ij' grids of the first two inputs swapped, then swapped
    back."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing is None:
        indexing = "ij"
    elif indexing not in ("ij", "xy"):
        raise RuntimeError(f'torch.meshgrid: indexing must be one of "xy" or "ij", but received: {indexing}')
    if not tensors:
        raise RuntimeError("meshgrid expects a non-empty TensorList")
    for t in tensors:
        if t.dim() > 1:
            raise RuntimeError(f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got: {t}")
    dtypes = {t._data.dtype for t in tensors}
    if len(dtypes) > 1:
        raise RuntimeError("meshgrid expects all tensors to have the same dtype")
    flat = [t.reshape(-1) for t in tensors]
    swap = indexing == "xy" and len(flat) >= 2
    if swap:
        flat[0], flat[1] = flat[1], flat[0]
    shape = tuple(int(t.shape[0]) for t in flat)
    grids = []
    for i, t in enumerate(flat):
        view = [1] * len(flat)
        view[i] = shape[i]
        grids.append(t.reshape(*view).expand(*shape))
    if swap:
        grids[0], grids[1] = grids[1], grids[0]
    return tuple(grids)

