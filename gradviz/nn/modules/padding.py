"""Padding layers: ``ZeroPad1d/2d``, ``ConstantPad1d/2d``, ``ReflectionPad1d/2d``, ``ReplicationPad1d/2d`` and
``CircularPad1d/2d``, each ``F.pad`` with a fixed amount and mode."""

from .. import functional as F
from ..module import Module


class _Pad(Module):
    _dims = 1
    _mode = "constant"

    def __init__(self, padding, value=0.0):
        super().__init__()
        self.padding = tuple(padding) if isinstance(padding, (tuple, list)) else (padding,) * (2 * self._dims)
        self.value = value

    def forward(self, input):
        return F.pad(input, self.padding, self._mode, self.value if self._mode == "constant" else None)

    def extra_repr(self):
        return f"{self.padding}"


class _ConstantPad(_Pad):
    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPad):
    def __init__(self, padding, value):
        super().__init__(padding, value)


class ConstantPad2d(_ConstantPad):
    _dims = 2

    def __init__(self, padding, value):
        super().__init__(padding, value)


class ZeroPad1d(_Pad):
    def __init__(self, padding):
        super().__init__(padding, 0.0)


class ZeroPad2d(_Pad):
    _dims = 2

    def __init__(self, padding):
        super().__init__(padding, 0.0)


class ReflectionPad1d(_Pad):
    _mode = "reflect"


class ReflectionPad2d(_Pad):
    _dims = 2
    _mode = "reflect"


class ReplicationPad1d(_Pad):
    _mode = "replicate"


class ReplicationPad2d(_Pad):
    _dims = 2
    _mode = "replicate"


class CircularPad1d(_Pad):
    _mode = "circular"


class CircularPad2d(_Pad):
    _dims = 2
    _mode = "circular"
