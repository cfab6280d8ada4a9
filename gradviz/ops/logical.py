"""Logical and bitwise ops, the NaN/inf tests, and ``masked_fill``.

Logical ops and the tests return bool tensors that never require grad. Bitwise ops work on bool and integer
tensors, in the promoted dtype; floats are refused with PyTorch's message. ``masked_fill`` is differentiable
in the tensor filled and in a 0-dim value tensor.
"""

import numpy as np

from ..autograd.function import Function
from ..dtypes import promote_pair
from ..errors import DtypeError

_TYPE_NAMES = {"float32": "Float", "float64": "Double", "int64": "Long", "int32": "Int", "bool": "Bool",
               "uint8": "Byte"}
_C_NAMES = {"float32": "float", "float64": "double", "int64": "long int", "int32": "int", "uint8": "unsigned char"}


class Logical(Function):
    """``logical_and/or/xor``: truth values of any dtype in, bool out."""

    _raw = True
    _differentiable = False

    @staticmethod
    def forward(ctx, a, b, op):
        ctx._meta = {"op": op}
        return np.asarray(_LOGICAL[op](a, b))


_LOGICAL = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}


class LogicalNot(Function):
    _raw = True
    _differentiable = False

    @staticmethod
    def forward(ctx, a):
        return np.asarray(np.logical_not(a))


class Bitwise(Function):
    """``bitwise_and/or/xor`` (``&``, ``|``, ``^``) on bool and integer tensors."""

    _raw = True
    _differentiable = False

    @staticmethod
    def forward(ctx, a, b, op):
        ctx._meta = {"op": op}
        a, b = promote_pair(a, b)
        dtype = a.dtype if isinstance(a, np.ndarray) else b.dtype
        _check_integral(dtype, f"bitwise_{op}")
        return np.asarray(_BITWISE[op](a, b))


_BITWISE = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}


class BitwiseNot(Function):
    """``~x``: logical not for bool tensors, two's-complement not for integers."""

    _raw = True
    _differentiable = False

    @staticmethod
    def forward(ctx, a):
        _check_integral(a.dtype, "bitwise_not")
        return np.asarray(np.invert(a))


def _check_integral(dtype, op):
    if dtype.kind not in "biu":
        raise NotImplementedError(f'"{op}_cpu" not implemented for \'{_TYPE_NAMES.get(str(dtype), dtype)}\'')


class Test(Function):
    """``isnan``, ``isinf``, ``isfinite``: bool results (integers are always finite)."""

    _raw = True
    _differentiable = False

    @staticmethod
    def forward(ctx, a, test):
        ctx._meta = {"test": test}
        if a.dtype.kind not in "fc":
            return np.full(a.shape, test == "isfinite")
        return np.asarray(_TESTS[test](a))


_TESTS = {"isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite}


class MaskedFill(Function):
    """``x.masked_fill(mask, value)``: ``value`` where ``mask`` is True, in ``x``'s dtype. The gradient of x is
    zero where filled; a 0-dim value tensor gets the sum of the gradient over the filled places."""

    _raw = True

    @staticmethod
    def forward(ctx, x, mask, value):
        if mask.dtype != np.bool_:
            raise DtypeError(f"masked_fill_ only supports boolean masks, but got mask with dtype "
                             f"{_C_NAMES.get(str(mask.dtype), mask.dtype)}")
        if isinstance(value, np.ndarray) and value.ndim:
            raise DtypeError(f"masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                             f"{value.ndim} dimension(s).")
        if ctx.needs_input_grad[0] or ctx.needs_input_grad[2]:
            ctx.save_for_backward(mask)
        return np.where(mask, np.asarray(value).astype(x.dtype), x)

    @staticmethod
    def backward(ctx, grad):
        (mask,) = ctx.saved_tensors
        zero = np.zeros((), dtype=grad.dtype)
        gx = np.where(mask, zero, grad) if ctx.needs_input_grad[0] else None
        gv = np.where(mask, grad, zero).sum() if ctx.needs_input_grad[2] else None
        return gx, None, gv
