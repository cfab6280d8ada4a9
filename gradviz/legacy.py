"""PyTorch's legacy typed constructors: ``FloatTensor``, ``DoubleTensor``, ``LongTensor``, ``IntTensor``,
``BoolTensor``.

Each is a *type* of tensor in PyTorch (``isinstance(x, torch.FloatTensor)`` holds for any float32 tensor) and a
constructor with the legacy forms: ``LongTensor(2, 3)`` is an uninitialised 2x3 tensor, ``LongTensor([1, 2])`` is
data, ``LongTensor()`` is empty.
"""

import numpy as np

from .dtypes import bool_, float32, float64, int32, int64


class _TensorType(type):
    """The metaclass: instances of these "types" are gradviz Variables of the matching dtype."""

    def __instancecheck__(cls, obj):
        from .autograd.variable import Variable

        return isinstance(obj, Variable) and obj.dtype == cls.dtype

    def __call__(cls, *args, device=None):
        from .autograd.variable import Variable

        if len(args) == 1 and isinstance(args[0], Variable):
            return args[0]._cast(cls.dtype)
        if len(args) == 1 and isinstance(args[0], np.ndarray):
            return Variable(args[0].astype(cls.dtype), device=device)
        return Variable(*args, dtype=cls.dtype, device=device)

    def __repr__(cls):
        return f"<class 'torch.{cls.__name__}'>"


class FloatTensor(metaclass=_TensorType):
    dtype = float32


class DoubleTensor(metaclass=_TensorType):
    dtype = float64


class LongTensor(metaclass=_TensorType):
    dtype = int64


class IntTensor(metaclass=_TensorType):
    dtype = int32


class BoolTensor(metaclass=_TensorType):
    dtype = bool_


LEGACY_TYPES = {t.__name__: t for t in (FloatTensor, DoubleTensor, LongTensor, IntTensor, BoolTensor)}


def legacy_dtype(value):
    """The dtype of ``torch.FloatTensor`` or ``"torch.FloatTensor"`` (``x.type(...)``'s argument), else None."""
    if isinstance(value, _TensorType):
        return value.dtype
    if isinstance(value, str) and value.startswith("torch.") and value[6:] in LEGACY_TYPES:
        return LEGACY_TYPES[value[6:]].dtype
    return None
