"""``finfo`` and ``iinfo``: the numerical limits of a dtype, with PyTorch's attribute names."""

import numpy as np

from .dtypes import as_dtype, default_float


class finfo:  # noqa: N801 - PyTorch's name
    """Limits of a floating-point dtype (the default float dtype when none is given)."""

    def __init__(self, type=None):  # noqa: A002 - PyTorch's argument name
        dtype = as_dtype(type) if type is not None else default_float()
        if dtype.kind != "f":
            raise TypeError("torch.finfo() requires a floating point input type. Use torch.iinfo to handle "
                            "'torch.finfo'")
        info = np.finfo(dtype)
        self.dtype = str(dtype)
        self.bits = int(info.bits)
        self.eps = float(info.eps)
        self.max = float(info.max)
        self.min = float(info.min)
        self.tiny = self.smallest_normal = float(info.smallest_normal)
        self.resolution = 10.0 ** -int(info.precision)  # as PyTorch: a power of ten, not float32-rounded

    def __repr__(self):
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
                f"smallest_normal={self.smallest_normal:g}, tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:  # noqa: N801 - PyTorch's name
    """Limits of an integer dtype."""

    def __init__(self, type):  # noqa: A002 - PyTorch's argument name
        dtype = as_dtype(type)
        if dtype.kind == "b":
            raise TypeError("torch.bool is not supported by torch.iinfo")
        if dtype.kind not in "iu":
            raise TypeError("torch.iinfo() requires an integer input type. Use torch.finfo to handle "
                            "'torch.iinfo'")
        info = np.iinfo(dtype)
        self.dtype = str(dtype)
        self.bits, self.min, self.max = int(info.bits), int(info.min), int(info.max)

    def __repr__(self):
        return f"iinfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype})"
