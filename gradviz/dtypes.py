"""PyTorch's dtype names, as numpy dtypes (``x.dtype == gradviz.float32`` holds)."""

import numpy as np

float32 = np.dtype(np.float32)
float64 = np.dtype(np.float64)
int64 = np.dtype(np.int64)
int32 = np.dtype(np.int32)
bool_ = np.dtype(np.bool_)
uint8 = np.dtype(np.uint8)
double = float64
long = int64

_ALIASES = {"float": float32, "double": float64, "long": int64, "int": int32, "bool": bool_}


def as_dtype(dtype):
    """Accept a numpy dtype, a Python type or a PyTorch-style name."""
    if dtype is None:
        return None
    if isinstance(dtype, str) and dtype in _ALIASES:
        return _ALIASES[dtype]
    if dtype is float:
        return float32
    if dtype is int:
        return int64
    if dtype is bool:
        return bool_
    return np.dtype(dtype)


# ----- PyTorch's type promotion (torch.result_type, torch.promote_types, torch.can_cast) -----------------------
# The default float dtype lives in this one-element list so that set_default_dtype can change it in one place.
_DEFAULT_FLOAT = [float32]


def default_float():
    """The dtype a Python float (and integer true division, float math on integers) becomes: float32 unless
    changed."""
    return _DEFAULT_FLOAT[0]


def _category(dtype):
    """0 bool, 1 integer, 2 floating, 3 complex: PyTorch promotes across categories, never down."""
    kind = dtype.kind
    return 0 if kind == "b" else 1 if kind in "iu" else 2 if kind == "f" else 3


def promote_types(type1, type2):
    """``torch.promote_types``: the smallest dtype both fit in, where a float wins over any integer as it is
    (int64 with float32 is float32, where numpy says float64)."""
    a, b = as_dtype(type1), as_dtype(type2)
    if a == b:
        return a
    key = (a, b)
    out = _PROMOTED.get(key)
    if out is None:
        ca, cb = _category(a), _category(b)
        if ca != cb and max(ca, cb) >= 2 and min(ca, cb) < 2:
            out = a if ca > cb else b
        else:
            out = np.promote_types(a, b)
        _PROMOTED[key] = out
    return out


_PROMOTED = {}  # (dtype, dtype) -> promoted dtype: a handful of pairs, asked on every mixed-dtype op


def _scalar_dtype(value):
    """A Python (or numpy) scalar's dtype as a wrapped number: bool, int64, or the default float dtype."""
    if isinstance(value, (bool, np.bool_)):
        return bool_
    if isinstance(value, (int, np.integer)):
        return int64
    if isinstance(value, (float, np.floating)):
        return default_float()
    if isinstance(value, (complex, np.complexfloating)):
        return np.dtype(np.complex64) if default_float() == float32 else np.dtype(np.complex128)
    raise TypeError(f"result_type() received an invalid combination of arguments: {type(value).__name__} is "
                    "neither a Tensor nor a Number")


def _combine(higher, lower):
    """PyTorch's combine_categories: the higher-priority dtype wins unless the lower one is of a higher
    category, and then promotion happens (a float of lower priority keeps its own width)."""
    if higher is None:
        return lower
    if lower is None:
        return higher
    ch, cl = _category(higher), _category(lower)
    if ch >= 2 and ch >= cl:
        return higher
    if cl == 3 and ch == 2:
        return np.dtype(np.complex64) if higher == float32 else np.dtype(np.complex128)
    if ch == 0 or cl > ch:
        return promote_types(higher, lower)
    return higher


def result_type(*operands):
    """``torch.result_type`` over any number of operands (Tensors, numpy arrays, Python or numpy scalars).

    Three priorities: tensors with dimensions, then 0-dim tensors, then Python numbers. Within a priority
    dtypes promote; a lower priority changes the result only when it is of a higher category (bool < integer
    < floating < complex), and a Python float then brings the default float dtype, not float64."""
    dim = zero = wrapped = None
    for op in operands:
        data = getattr(op, "_data", op)  # a Variable's array, without importing the autograd package
        if isinstance(data, np.ndarray):
            if data.ndim:
                dim = data.dtype if dim is None or dim == data.dtype else promote_types(dim, data.dtype)
            else:
                zero = data.dtype if zero is None or zero == data.dtype else promote_types(zero, data.dtype)
        else:
            dt = _scalar_dtype(data)
            wrapped = dt if wrapped is None or wrapped == dt else promote_types(wrapped, dt)
    key = (dim, zero, wrapped, _DEFAULT_FLOAT[0])
    out = _RESULTS.get(key)
    if out is None:
        out = _RESULTS[key] = _combine(dim, _combine(zero, wrapped))
    if out is None:
        raise TypeError("result_type() needs at least one operand")
    return out


_RESULTS = {}  # (dimensioned, 0-dim, wrapped dtype, default float) -> result dtype


def can_cast(from_, to):
    """``torch.can_cast``: casting never goes down a category (float to int, int to bool); within one, any
    width is allowed."""
    return _category(as_dtype(from_)) <= _category(as_dtype(to))


_ndarray = np.ndarray


def promote_pair(a, b):
    """Two op inputs (numpy arrays or Python numbers) in their ``result_type``, ready for a numpy ufunc.

    A Python number is left as it is: numpy 2 gives it the array's dtype, which is then the result's. The
    common cases (one dtype; a float tensor with a Python float; a number tensor with a Python int) return at
    once: this runs on every binary op."""
    ta, tb = type(a), type(b)
    if ta is _ndarray:
        if tb is _ndarray:
            if a.dtype == b.dtype:
                return a, b
        elif (tb is float and a.dtype.kind == "f") or (tb is int and a.dtype.kind in "fiu"):
            return a, b
    elif tb is _ndarray and ((ta is float and b.dtype.kind == "f") or (ta is int and b.dtype.kind in "fiu")):
        return a, b
    dtype = result_type(a, b)
    return cast_operand(a, dtype), cast_operand(b, dtype)


def cast_operand(x, dtype):
    """An op input in ``dtype``: arrays are cast; numpy scalars become Python numbers (numpy 2 would let a
    np.float64 widen a float32 array, where PyTorch treats it as a Python float)."""
    if isinstance(x, _ndarray):
        return x if x.dtype == dtype else x.astype(dtype)
    if isinstance(x, np.generic):
        return x.item()
    return x


# ----- torch.set_default_dtype / get_default_dtype: the settable default lives in _DEFAULT_FLOAT above ----------
def set_default_dtype(dtype):
    """``torch.set_default_dtype``: float32 or float64 (what a Python float and the float factories become)."""
    resolved = as_dtype(dtype)
    if resolved not in (float32, float64):
        if resolved.kind == "f":
            raise TypeError(f"gradviz supports float32 and float64 as the default dtype, not {resolved}")
        raise TypeError("only floating-point types are supported as the default type")
    _DEFAULT_FLOAT[0] = resolved


def get_default_dtype():
    return _DEFAULT_FLOAT[0]
