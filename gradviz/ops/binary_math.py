"""Pointwise math of two or three tensors: atan2, hypot, fmod, remainder, lerp, floor division, division with
a rounding mode, and clamp with tensor bounds. Inputs are promoted with PyTorch's ``result_type``; backward
returns gradients in the broadcast shape (the engine sums them down)."""

import numpy as np

from ..autograd.function import Function
from ..dtypes import cast_operand, default_float, promote_pair, result_type
from ..errors import DtypeError

_TYPE_NAMES = {"float32": "Float", "float64": "Double", "int64": "Long", "int32": "Int", "bool": "Bool",
               "uint8": "Byte"}


def _float_pair(a, b):
    """Promote, then lift integers to the default float dtype (atan2 of two long tensors is float32)."""
    a, b = promote_pair(a, b)
    dtype = a.dtype if isinstance(a, np.ndarray) else b.dtype
    if dtype.kind not in "fc":
        target = default_float()
        a = a.astype(target) if isinstance(a, np.ndarray) else a
        b = b.astype(target) if isinstance(b, np.ndarray) else b
    return a, b


class Atan2(Function):
    _raw = True

    @staticmethod
    def forward(ctx, a, b):
        if ctx.needs_input_grad[0] or ctx.needs_input_grad[1]:
            ctx.save_for_backward(a, b)
        return np.arctan2(*_float_pair(a, b))

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        with np.errstate(all="ignore"):
            scale = grad / (a * a + b * b)
        return (scale * b if ctx.needs_input_grad[0] else None), (-scale * a if ctx.needs_input_grad[1] else None)


class Hypot(Function):
    _raw = True

    @staticmethod
    def forward(ctx, a, b):
        a, b = promote_pair(a, b)
        dtype = a.dtype if isinstance(a, np.ndarray) else b.dtype
        if dtype.kind not in "fc":
            raise NotImplementedError(f'"hypot_cpu" not implemented for \'{_TYPE_NAMES.get(str(dtype), dtype)}\'')
        out = np.asarray(np.hypot(a, b))
        if ctx.needs_input_grad[0] or ctx.needs_input_grad[1]:
            ctx.save_for_backward(a, b, out)
        return out

    @staticmethod
    def backward(ctx, grad):
        a, b, out = ctx.saved_tensors
        with np.errstate(all="ignore"):
            scale = grad / out
        return (scale * a if ctx.needs_input_grad[0] else None), (scale * b if ctx.needs_input_grad[1] else None)


class _Modulo(Function):
    """``a mod b``: the result is ``a - round(a / b) * b``, so d/da is 1 and d/db is ``-round(a / b)``; subclasses
    name numpy's kernel, the rounding and PyTorch's kernel (for the division-by-zero message)."""

    _raw = True

    @classmethod
    def forward(cls, ctx, a, b):
        a, b = promote_pair(a, b)
        _check_integer_divisor(a, b, cls._kernel)
        if ctx.needs_input_grad[1]:
            ctx.save_for_backward(a, b)
        with np.errstate(all="ignore"):
            return cls._mod(a, b)

    @classmethod
    def backward(cls, ctx, grad):
        gb = None
        if ctx.needs_input_grad[1]:
            a, b = ctx.saved_tensors
            with np.errstate(all="ignore"):
                gb = -grad * cls._round(np.true_divide(a, b))
        return grad, gb


class Fmod(_Modulo):
    """C's fmod: the result has the dividend's sign. d/db is -trunc(a / b)."""

    _kernel, _mod, _round = "fmod_cpu", staticmethod(np.fmod), staticmethod(np.trunc)


class Remainder(_Modulo):
    """Python's modulo: the result has the divisor's sign. d/db is -floor(a / b)."""

    _kernel, _mod, _round = "remainder_cpu", staticmethod(np.remainder), staticmethod(np.floor)


def _check_integer_divisor(a, b, kernel):
    """PyTorch has no bool kernel for these, and integer division by zero is an error there (numpy would warn
    and give 0). Operands are already promoted."""
    dtype = a.dtype if isinstance(a, np.ndarray) else b.dtype
    if dtype.kind == "b":
        raise NotImplementedError(f'"{kernel}" not implemented for \'Bool\'')
    if dtype.kind in "iu" and not np.all(b):
        raise RuntimeError("ZeroDivisionError")


class FloorDivide(Function):
    """``a // b``. PyTorch has no derivative for it: backward through it fails, as there."""

    _raw = True

    @staticmethod
    def forward(ctx, a, b):
        a, b = promote_pair(a, b)
        _check_integer_divisor(a, b, "div_floor_cpu")
        with np.errstate(all="ignore"):
            return np.floor_divide(a, b)

    @staticmethod
    def backward(ctx, grad):
        raise RuntimeError("derivative for aten::floor_divide is not implemented")


class DivMode(Function):
    """``div(a, b, rounding_mode="trunc" | "floor")``: the quotient rounded; the gradient is zero (PyTorch's)."""

    _raw = True

    @staticmethod
    def forward(ctx, a, b, rounding_mode):
        ctx._meta = {"rounding_mode": rounding_mode}
        a, b = promote_pair(a, b)
        integral = (a.dtype if isinstance(a, np.ndarray) else b.dtype).kind in "iub"
        if integral:
            _check_integer_divisor(a, b, f"div_{rounding_mode}_cpu")
            floor = np.floor_divide(a, b)
            if rounding_mode == "floor":
                return floor
            # Truncation: floor, moved one up where the exact quotient was negative and not whole.
            return floor + ((np.remainder(a, b) != 0) & (floor < 0)).astype(floor.dtype)
        with np.errstate(all="ignore"):
            # numpy's float floor_divide is Python's (and PyTorch's) divmod-based one, not floor(a / b).
            return np.floor_divide(a, b) if rounding_mode == "floor" else np.trunc(np.true_divide(a, b))

    @staticmethod
    def backward(ctx, grad):
        return np.zeros_like(grad), np.zeros_like(grad)

    @classmethod
    def name(cls):
        return "DivBackward"  # PyTorch's node for every div overload


class Lerp(Function):
    """``start + weight * (end - start)``, computed as PyTorch does (from ``end`` when weight >= 0.5, which is
    exact at weight 1). ``start`` and ``end`` must share a dtype."""

    _raw = True

    @staticmethod
    def forward(ctx, start, end, weight):
        if start.dtype != end.dtype:
            raise DtypeError(f"expected dtype {_C_NAMES.get(str(start.dtype), start.dtype)} for `end` but got dtype "
                            f"{_C_NAMES.get(str(end.dtype), end.dtype)}")
        if isinstance(weight, np.ndarray) and weight.dtype != start.dtype:
            raise DtypeError(f"expected dtype {_C_NAMES.get(str(start.dtype), start.dtype)} for `weight` but got "
                            f"dtype {_C_NAMES.get(str(weight.dtype), weight.dtype)}")
        need = ctx.needs_input_grad
        if need[0] or need[1] or need[2]:
            ctx.save_for_backward(weight if (need[0] or need[1]) else None, start if need[2] else None,
                                  end if need[2] else None)
        diff = end - start
        w = weight if isinstance(weight, np.ndarray) else start.dtype.type(weight)
        return np.asarray(np.where(np.abs(w) < 0.5, start + w * diff, end - diff * (1 - w)))

    @staticmethod
    def backward(ctx, grad):
        weight, start, end = ctx.saved_tensors
        need = ctx.needs_input_grad
        return (grad * (1 - weight) if need[0] else None, grad * weight if need[1] else None,
                grad * (end - start) if need[2] else None)


_C_NAMES = {"float32": "float", "float64": "double", "int64": "long int", "int32": "int", "bool": "bool",
            "uint8": "unsigned char"}


class ClampTensor(Function):
    """``clamp`` with tensor bounds (either may be None): ``min(max(x, lo), hi)`` in the promoted dtype; the
    gradient goes to whichever of x, lo, hi the result came from (PyTorch's rule when lo > hi: hi wins)."""

    _raw = True

    @staticmethod
    def forward(ctx, x, lo, hi):
        dtype = result_type(*(v for v in (x, lo, hi) if v is not None))
        if any(ctx.needs_input_grad):
            ctx.save_for_backward(x, lo, hi)
        out = cast_operand(x, dtype)
        if lo is not None:
            out = np.maximum(out, cast_operand(lo, dtype))
        if hi is not None:
            out = np.minimum(out, cast_operand(hi, dtype))
        return np.array(out, copy=True) if out is x else out

    @staticmethod
    def backward(ctx, grad):
        x, lo, hi = ctx.saved_tensors
        need = ctx.needs_input_grad
        zero = np.zeros((), dtype=grad.dtype)
        inside = np.ones(np.shape(x), dtype=bool)
        if lo is not None:
            inside = inside & (x >= lo)
        if hi is not None:
            inside = inside & (x <= hi)
        gx = np.where(inside, grad, zero) if need[0] else None
        glo = ghi = None
        if need[1]:
            below = x < lo if hi is None else (x < lo) & (lo < hi)
            glo = np.where(below, grad, zero)
        if need[2]:
            above = x > hi if lo is None else (x > hi) | (hi < lo)
            ghi = np.where(above, grad, zero)
        return gx, glo, ghi

    @classmethod
    def name(cls):
        return "ClampBackward"


class ClampMin(ClampTensor):
    """``clamp_min(bound)`` (a tensor or a number): PyTorch gives it a node of its own name."""

    @classmethod
    def name(cls):
        return "ClampMinBackward"


class ClampMax(ClampTensor):
    @classmethod
    def name(cls):
        return "ClampMaxBackward"
