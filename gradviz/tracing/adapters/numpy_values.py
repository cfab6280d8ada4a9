"""What gradviz's adapter measures on numpy arrays: dtype names, gradient norms, the NaN/Inf check.

Each costs one BLAS dot product over the array's memory (no floating-point warnings); the exact check runs only
when that dot is not finite. None of them makes a temporary the size of the array: a broadcast view is measured
over its distinct elements, an array whose memory is not one dense run a chunk at a time.
"""

import math
from math import isfinite, sqrt

import numpy as np

_dtype_names = {}


def dtype_name(dtype):
    """``dtype.name`` is computed in Python by numpy on every access: cache it."""
    name = _dtype_names.get(dtype)
    if name is None:
        name = _dtype_names[dtype] = dtype.name
    return name


_CHUNK = 1 << 16  # elements: the most any check copies at once (a float64 chunk is 512 KiB)


def _blocks(a):
    """1-d pieces of ``a`` that together hold each of its elements once, and how many times each stands for
    (a broadcast view repeats one element): the array's memory itself when it is one dense run, otherwise
    pieces of at most ``_CHUNK`` elements (copies that small) — never an O(n) temporary."""
    repeat = 1
    if 0 in a.strides and a.size:  # a broadcast view: its distinct elements once, counted ``repeat`` times
        index = []
        for n, stride in zip(a.shape, a.strides):
            if stride == 0 and n > 1:
                index.append(slice(0, 1))
                repeat *= n
            else:
                index.append(slice(None))
        a = a[tuple(index)]
    return _pieces(a), repeat


def _pieces(a):
    if a.size <= _CHUNK or a.flags.c_contiguous or a.flags.f_contiguous:
        return [a.ravel("K")]  # a view when dense, else a copy of at most _CHUNK elements
    order = sorted(range(a.ndim), key=lambda i: -abs(a.strides[i]))
    a = a.transpose(order)  # outermost in memory first
    if a.flags.c_contiguous:  # dense, axes permuted: ravel("K") is a view
        return [a.ravel("K")]
    return _split(a)


def _split(a):
    if a.size <= _CHUNK:
        yield a.ravel("K")
        return
    n = a.shape[0]
    if a.ndim == 1:
        for i in range(0, n, _CHUNK):
            yield a[i:i + _CHUNK].copy()  # a strided run, copied a chunk at a time
        return
    rows = _CHUNK // (a.size // n)
    if rows <= 1:
        for i in range(n):
            yield from _split(a[i])
    else:
        for i in range(0, n, rows):
            yield from _split(a[i:i + rows])


def _square_sum(a):
    """Sum of squares with BLAS dots over the array's memory (no O(n) copy, whatever its strides)."""
    if a.__class__ is not np.ndarray:
        a = np.asarray(a)
    kind = a.dtype.kind
    pieces, repeat = _blocks(a)
    total = 0.0
    with np.errstate(all="ignore"):  # a short dot may not go through BLAS and warn on overflow: NaN/Inf pass
        for flat in pieces:
            if kind != "f":
                flat = np.abs(flat) if kind == "c" else flat.astype(np.float64)
            total += float(flat.dot(flat))  # the method: no __array_function__ dispatch, unlike np.dot
    return total * repeat if repeat != 1 else total


def norm_one(g):
    """The L2 norm of one gradient array, as a float; NaN/Inf pass through."""
    if g.__class__ is np.ndarray and g.dtype.kind == "f" and (g.size <= _CHUNK or g.flags.c_contiguous):
        flat = g.ravel("K")
        total = float(flat.dot(flat))
    else:
        total = _square_sum(g)
    return sqrt(total) if total >= 0 else total


def norm_of(arrays):
    """The L2 norm of a gradient (or several: one per output), as a float; NaN/Inf pass through."""
    if len(arrays) == 1:
        g = arrays[0]
        return 0.0 if g is None else norm_one(g)
    total = 0.0
    for g in arrays:
        if g is not None:
            total += _square_sum(g)
    return sqrt(total) if total >= 0 else total


def _all_finite(a):
    """``np.isfinite(a).all()`` a block at a time (its boolean temporary is at most ``_CHUNK`` long)."""
    pieces, _ = _blocks(a)
    for flat in pieces:
        for i in range(0, flat.size, _CHUNK):
            if not np.isfinite(flat[i:i + _CHUNK]).all():
                return False
    return True


def nonfinite(array):
    """True when a float array holds NaN or Inf: one dot product (no copy); the exact check runs only when that
    dot is not finite (which huge but finite values can also cause)."""
    if array.__class__ is not np.ndarray:
        return False
    kind = array.dtype.kind
    if kind == "f":
        if array.size <= _CHUNK or array.flags.c_contiguous:
            flat = array.ravel("K")
            if isfinite(flat.dot(flat)):  # a BLAS dot raises no floating-point warnings
                return False
        elif isfinite(_square_sum(array)):
            return False
    elif kind != "c" or array.size == 0 or isfinite(_square_sum(array)):
        return False
    return not _all_finite(array)


def nonfinite_norm(norm, arrays):
    """Given a norm from ``norm_of``: whether those arrays really hold NaN/Inf (not just an overflowing norm)."""
    if math.isfinite(norm):
        return False
    return any(g is not None and not _all_finite(np.asarray(g)) for g in arrays)


def scalar_root(roots):
    """The value of a backward's single root when it is one float (a loss), else None."""
    if len(roots) != 1:
        return None
    data = getattr(roots[0], "_data", None)
    if data is None or getattr(data, "size", 0) != 1 or getattr(data, "dtype", None) is None or \
            data.dtype.kind != "f":
        return None
    return float(data.reshape(-1)[0])


def storage_key(array):
    """The key of the memory ``array`` lives in: the ndarray that owns it (a view's base, followed to the end)."""
    root = array
    while root.base.__class__ is np.ndarray:
        root = root.base
    return id(root)
