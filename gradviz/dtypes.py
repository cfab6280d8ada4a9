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
