"""What gradviz's adapter measures on numpy arrays: dtype names, gradient norms, the NaN/Inf check.

Each costs one BLAS dot product over the array's memory (no copy, no floating-point warnings); the exact check
runs only when that dot is not finite.
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


def _square_sum(a):
    """Sum of squares with one BLAS dot over the array's memory order (no copy for transposed views)."""
    if a.__class__ is not np.ndarray:
        a = np.asarray(a)
    kind = a.dtype.kind
    if kind != "f":
        a = np.abs(a) if kind == "c" else a.astype(np.float64)
    flat = a.ravel("K")
    return float(flat.dot(flat))  # the method: no __array_function__ dispatch, unlike np.dot


def norm_one(g):
    """The L2 norm of one gradient array, as a float; NaN/Inf pass through."""
    if g.__class__ is np.ndarray and g.dtype.kind == "f":
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


def nonfinite(array):
    """True when a float array holds NaN or Inf: one dot product; the exact check runs only when that dot is not
    finite (which huge but finite values can also cause)."""
    if array.__class__ is not np.ndarray:
        return False
    kind = array.dtype.kind
    if kind == "f":
        flat = array.ravel("K")
        if isfinite(flat.dot(flat)):  # a BLAS dot raises no floating-point warnings
            return False
    elif kind != "c" or array.size == 0 or isfinite(_square_sum(array)):
        return False
    return not bool(np.isfinite(array).all())


def nonfinite_norm(norm, arrays):
    """Given a norm from ``norm_of``: whether those arrays really hold NaN/Inf (not just an overflowing norm)."""
    if math.isfinite(norm):
        return False
    return any(g is not None and not bool(np.isfinite(g).all()) for g in arrays)
