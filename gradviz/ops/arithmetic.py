"""Binary arithmetic: + - * / ** @, negation, elementwise maximum/minimum.

Backward returns gradients in the broadcast shape; the engine sums them down to each input's shape.
"""

import numpy as np

from ..autograd.function import Function
from ..dtypes import default_float, promote_pair
from ..errors import DtypeError, ShapeError, UnsupportedError


class Add(Function):
    _raw = True

    @staticmethod
    def forward(ctx, a, b):
        return np.add(*promote_pair(a, b))

    @staticmethod
    def backward(ctx, grad):
        return grad, grad


class Sub(Function):
    _raw = True

    @staticmethod
    def forward(ctx, a, b):
        if _is_bool(a) or _is_bool(b):
            if _is_bool(a) and _is_bool(b):
                raise DtypeError("Subtraction, the `-` operator, with two bool tensors is not supported. Use the "
                                 "`^` or `logical_xor()` operator instead.")
            raise DtypeError("Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying "
                             "to invert a mask, use the `~` or `logical_not()` operator instead.")
        return np.subtract(*promote_pair(a, b))

    @staticmethod
    def backward(ctx, grad):
        return grad, (-grad if ctx.needs_input_grad[1] else None)


class Mul(Function):
    _raw = True

    @staticmethod
    def forward(ctx, a, b):
        need_a, need_b = ctx.needs_input_grad
        if need_a or need_b:
            ctx.save_for_backward(b if need_a else None, a if need_b else None)
        return np.multiply(*promote_pair(a, b))

    @staticmethod
    def backward(ctx, grad):
        b, a = ctx.saved_tensors
        return (grad * b if b is not None else None), (grad * a if a is not None else None)


class Div(Function):
    _raw = True

    @staticmethod
    def forward(ctx, a, b):
        need_a, need_b = ctx.needs_input_grad
        if need_a or need_b:
            # PyTorch's saved set (the divisor, and the dividend only for the divisor's gradient): an in-place
            # change to the quotient is then legal, as it is in PyTorch.
            ctx.save_for_backward(b, a if need_b else None)
        return _true_divide(a, b)

    @staticmethod
    def backward(ctx, grad):
        b, a = ctx.saved_tensors
        ga = grad / b if ctx.needs_input_grad[0] else None
        gb = -grad * a / (b * b) if ctx.needs_input_grad[1] else None
        return ga, gb


def _true_divide(a, b):
    a, b = promote_pair(a, b)
    if not _is_float(a) and not _is_float(b):
        # PyTorch divides integers into the default float dtype; numpy would give float64.
        dtype = default_float()
        a, b = _as(a, dtype), _as(b, dtype)
    return np.true_divide(a, b)


def _integer_power(a, b):
    """An integer tensor to integer powers some of which are negative: 1 and -1 keep a value, the rest give 0."""
    if not isinstance(b, np.ndarray):
        raise RuntimeError("Integers to negative integer powers are not allowed.")
    positive = np.power(a, np.maximum(b, 0))
    odd = np.remainder(b, 2) == 1
    negative = np.where(a == 1, 1, np.where(a == -1, np.where(odd, -1, 1), 0))
    return np.asarray(np.where(b < 0, negative, positive).astype(positive.dtype, copy=False))


def _bool_power(a, b):
    """PyTorch has no bool pow, except a bool tensor to a Python bool power (x ** True is x, x ** False ones)."""
    if isinstance(b, (bool, np.bool_)) and isinstance(a, np.ndarray):
        return a.copy() if b else np.ones_like(a)
    raise NotImplementedError("\"pow\" not implemented for 'Bool'")


def _is_bool(x):
    return isinstance(x, (bool, np.bool_)) or (isinstance(x, np.ndarray) and x.dtype.kind == "b")


def _is_float(x):
    return isinstance(x, float) or (isinstance(x, np.ndarray) and x.dtype.kind in "fc")


def _as(x, dtype):
    return x.astype(dtype) if isinstance(x, np.ndarray) else dtype.type(x)


class Neg(Function):
    _raw = True

    @staticmethod
    def forward(ctx, a):
        if a.dtype.kind == "b":
            raise DtypeError("Negation, the `-` operator, on a bool tensor is not supported. If you are trying to "
                            "invert a mask, use the `~` or `logical_not()` operator instead.")
        return np.negative(a)

    @staticmethod
    def backward(ctx, grad):
        return -grad


class Pow(Function):
    _raw = True

    @staticmethod
    def forward(ctx, a, b):
        a_, b_ = promote_pair(a, b)
        if _is_bool(a_) and _is_bool(b_):
            return _bool_power(a_, b_)  # bools never need a gradient
        try:
            out = np.asarray(np.power(a_, b_))  # an array even when 0-d: saved, it must be versioned
        except ValueError:  # numpy refuses any negative integer exponent; PyTorch only a Python number one
            out = _integer_power(a_, b_)
        need_a, need_b = ctx.needs_input_grad
        if need_a or need_b:
            # PyTorch keeps the result whenever the exponent is a tensor (PowBackward1), needed or not.
            ctx.save_for_backward(a, b, out if need_b or isinstance(b, np.ndarray) else None)
        return out

    @staticmethod
    def backward(ctx, grad):
        a, b, out = ctx.saved_tensors
        ga = gb = None
        if ctx.needs_input_grad[0]:
            ga = grad * b * np.power(a, b - 1)
            # d/da a**0 is 0 everywhere, including a == 0 (where b * a**(b-1) would be 0 * inf).
            ga = np.where(np.asarray(b) == 0, 0.0, ga).astype(ga.dtype, copy=False)
        if ctx.needs_input_grad[1]:
            with np.errstate(divide="ignore", invalid="ignore"):
                log_a = np.log(a)
            # PyTorch's convention: the exponent's gradient is 0 where the base is 0 and the result is 0.
            gb = grad * np.where((np.asarray(a) == 0) & (np.asarray(b) >= 0), 0.0, out * log_a)
        return ga, gb


class MatMul(Function):
    _raw = True

    @staticmethod
    def forward(ctx, a, b):
        a_nd, b_nd = np.ndim(a), np.ndim(b)
        if a_nd == 0 or b_nd == 0:
            raise ShapeError("both arguments to matmul need to be at least 1D, but they are "
                             f"{a_nd}D and {b_nd}D")
        inner_a = np.shape(a)[-1]
        inner_b = np.shape(b)[-2] if b_nd > 1 else np.shape(b)[0]
        if inner_a != inner_b:
            _matmul_shape_error(a, b)
        if a.dtype != b.dtype:  # PyTorch does not promote in matmul
            what = "dot : expected both vectors to have same dtype, but found" if a_nd == b_nd == 1 else \
                "expected m1 and m2 to have the same dtype, but got:"
            sep = " and " if a_nd == b_nd == 1 else " != "
            names = [(_TYPE_NAMES if a_nd == b_nd == 1 else _SCALAR_NAMES).get(str(d), str(d))
                     for d in (a.dtype, b.dtype)]
            raise DtypeError(f"{what} {names[0]}{sep}{names[1]}")
        if a.dtype.kind == "b":
            _matmul_bool_error(a_nd, b_nd)
        need_a, need_b = ctx.needs_input_grad
        if need_a or need_b:
            ctx.save_for_backward(b if need_a else None, a if need_b else None)
        ctx._ndims = (a_nd, b_nd)
        try:
            return np.matmul(a, b)
        except ValueError:
            _matmul_shape_error(a, b)

    @staticmethod
    def backward(ctx, grad):
        b, a = ctx.saved_tensors
        a_nd, b_nd = ctx._ndims
        ga = gb = None
        if b is not None:  # gradient for a
            if b_nd == 1:
                ga = np.multiply.outer(grad, b) if a_nd > 1 else grad * b
            elif a_nd == 1:
                ga = np.matmul(b, grad[..., None])[..., 0]
            else:
                ga = np.matmul(grad, np.swapaxes(b, -1, -2))
        if a is not None:  # gradient for b
            if a_nd == 1:
                gb = np.multiply.outer(a, grad) if b_nd > 1 else grad * a
                if b_nd > 2:
                    gb = np.moveaxis(gb, 0, -2)
            elif b_nd == 1:
                gb = np.matmul(np.swapaxes(a, -1, -2), grad[..., None])[..., 0]
            else:
                gb = np.matmul(np.swapaxes(a, -1, -2), grad)
        return ga, gb


def _matmul_shape_error(a, b):
    """PyTorch's message for the case at hand (it dispatches 1-D, 2-D and batched products to different kernels)."""
    sa, sb = np.shape(a), np.shape(b)
    if len(sa) == 1 and len(sb) == 1:
        raise ShapeError(f"inconsistent tensor size, expected tensor [{sa[0]}] and src [{sb[0]}] to have the same "
                         f"number of elements, but got {sa[0]} and {sb[0]} elements respectively")
    if len(sa) == 2 and len(sb) == 1:
        raise ShapeError(f"size mismatch, got input ({sa[0]}), mat ({sa[0]}x{sa[1]}), vec ({sb[0]})")
    if len(sa) >= 3 and len(sb) >= 3 and sa[:-2] == sb[:-2] and sa[-1] != sb[-2]:
        raise ShapeError(f"Expected size for first two dimensions of batch2 tensor to be: [{sa[0]}, {sa[-1]}] but "
                         f"got: [{sb[0]}, {sb[-2]}].")
    if sa[-1] != (sb[-2] if len(sb) > 1 else sb[0]):
        raise ShapeError(f"mat1 and mat2 shapes cannot be multiplied ({_shape_text(a)} and {_shape_text(b)})")
    ba, bb = sa[:-2], sb[:-2]
    n = max(len(ba), len(bb))
    ba, bb = (1,) * (n - len(ba)) + ba, (1,) * (n - len(bb)) + bb
    for k in range(n - 1, -1, -1):
        if ba[k] != bb[k] and 1 not in (ba[k], bb[k]):
            raise ShapeError(f"The size of tensor a ({ba[k]}) must match the size of tensor b ({bb[k]}) at "
                             f"non-singleton dimension {k}")
    raise ShapeError(f"matmul: shapes {list(sa)} and {list(sb)} do not fit")


def _matmul_bool_error(a_nd, b_nd):
    """PyTorch has no boolean matmul; its message names the kernel the shapes dispatch to."""
    kernel = ("dot" if a_nd == b_nd == 1 else "addmv_impl_cpu" if b_nd == 1 else "addmm_impl_cpu_"
              if b_nd == 2 or a_nd == 1 else "bmm")
    raise UnsupportedError(f'"{kernel}" not implemented for \'Bool\'')


def _shape_text(x):
    shape = np.shape(x)
    return "x".join(str(d) for d in shape) if len(shape) != 1 else f"1x{shape[0]}"


class Maximum(Function):
    """Elementwise maximum of two tensors; ties split the gradient evenly, as PyTorch does."""

    _raw = True

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return np.maximum(*promote_pair(a, b))

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return _split_by_winner(grad, a > b, a == b)


class Minimum(Function):
    _raw = True

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return np.minimum(*promote_pair(a, b))

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return _split_by_winner(grad, a < b, a == b)


def _split_by_winner(grad, a_wins, tie):
    wa = np.where(a_wins, 1.0, np.where(tie, 0.5, 0.0)).astype(grad.dtype)
    return grad * wa, grad * (1 - wa)


_SCALAR_NAMES = {"float32": "float", "float64": "double", "int64": "long int", "int32": "int",
                 "bool": "bool", "uint8": "unsigned char"}

_TYPE_NAMES = {"float32": "Float", "float64": "Double", "int64": "Long", "int32": "Int", "bool": "Bool",
               "uint8": "Byte"}
