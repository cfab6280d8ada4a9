"""Matrix products beyond ``@`` (bmm, addmm, baddbmm, dot, outer, einsum) and the triangular/diagonal ops
(tril, triu, diag, trace)."""

import string

import numpy as np

from ..autograd.function import Function
from ..dtypes import promote_pair
from ..errors import DtypeError, ShapeError, UnsupportedError
from .arithmetic import MatMul, Mul
from .shape import diagonal_view


def _type_name(dtype):
    return {"float32": "Float", "float64": "Double", "int64": "Long", "int32": "Int", "bool": "Bool"}.get(
        str(dtype), str(dtype))


def _ndim(x):
    return x._data.ndim if hasattr(x, "_data") else np.ndim(x)


def _dtype(x):
    return x._data.dtype if hasattr(x, "_data") else np.asarray(x).dtype


def _shape(x):
    return tuple(x._data.shape) if hasattr(x, "_data") else np.shape(x)


def _refuse_bool(kernel, *operands):
    """PyTorch has no boolean matrix products: its kernels say so by name."""
    if any(_dtype(o) == np.bool_ for o in operands):
        raise UnsupportedError(f'"{kernel}" not implemented for \'Bool\'')


class Bmm(MatMul):
    """``bmm``: a batch of matrix products, without broadcasting (checked before)."""


def bmm(a, b):
    for name, x in (("batch1", a), ("batch2", b)):
        if _ndim(x) != 3:
            raise ShapeError(f"{name} must be a 3D tensor")
    sa, sb = _shape(a), _shape(b)
    if sb[:2] != (sa[0], sa[2]):
        raise ShapeError(f"Expected size for first two dimensions of batch2 tensor to be: [{sa[0]}, {sa[2]}] but "
                         f"got: [{sb[0]}, {sb[1]}].")
    if _dtype(a) != _dtype(b):
        raise DtypeError(f"expected scalar type {_type_name(_dtype(a))} but found {_type_name(_dtype(b))}")
    _refuse_bool("bmm", a, b)
    return Bmm.apply(a, b)


class Addmm(Function):
    """``beta * input + alpha * (m1 @ m2)`` for matrices (``addmm``) or batches of them (``baddbmm``)."""

    _raw = True

    @staticmethod
    def forward(ctx, c, m1, m2, beta=1, alpha=1):
        need_c, need_1, need_2 = ctx.needs_input_grad
        ctx._scale = (beta, alpha)
        ctx._meta = {"beta": beta, "alpha": alpha}
        if need_1 or need_2:
            ctx.save_for_backward(m2 if need_1 else None, m1 if need_2 else None)
        product = np.matmul(m1, m2)
        if alpha != 1:
            product = product * alpha
        if beta == 0:  # PyTorch ignores the input then, NaN and inf included
            return np.broadcast_to(product, np.broadcast_shapes(np.shape(c), product.shape)).copy()
        return (c * beta if beta != 1 else c) + product

    @staticmethod
    def backward(ctx, grad):
        m2, m1 = ctx.saved_tensors
        beta, alpha = ctx._scale
        gc = (grad * beta if beta != 1 else grad) if ctx.needs_input_grad[0] else None
        g1 = np.matmul(grad, np.swapaxes(m2, -1, -2)) * alpha if m2 is not None else None
        g2 = np.matmul(np.swapaxes(m1, -1, -2), grad) * alpha if m1 is not None else None
        return gc, g1, g2


class Baddbmm(Addmm):
    pass


def addmm(c, m1, m2, beta=1, alpha=1):
    check_addmm(c, m1, m2)
    return Addmm.apply(c, m1, m2, beta=beta, alpha=alpha)


def check_addmm(c, m1, m2):
    if _ndim(m1) != 2:
        raise ShapeError(f"mat1 must be a matrix, got {_ndim(m1)}-D tensor")
    if _ndim(m2) != 2:
        raise ShapeError(f"mat2 must be a matrix, got {_ndim(m2)}-D tensor")
    s1, s2 = _shape(m1), _shape(m2)
    if s1[1] != s2[0]:
        raise ShapeError(f"mat1 and mat2 shapes cannot be multiplied ({s1[0]}x{s1[1]} and {s2[0]}x{s2[1]})")
    _same_dtype(c, m1, m2)
    _refuse_bool("addmm_impl_cpu_", m1)
    _broadcastable(c, (s1[0], s2[1]), "addmm")


def baddbmm(c, b1, b2, beta=1, alpha=1):
    check_baddbmm(c, b1, b2)
    return Baddbmm.apply(c, b1, b2, beta=beta, alpha=alpha)


def check_baddbmm(c, b1, b2):
    for name, x in (("batch1", b1), ("batch2", b2)):
        if _ndim(x) != 3:
            raise ShapeError(f"{name} must be a 3D tensor")
    s1, s2 = _shape(b1), _shape(b2)
    if s2[:2] != (s1[0], s1[2]):
        raise ShapeError(f"Expected size for first two dimensions of batch2 tensor to be: [{s1[0]}, {s1[2]}] but "
                         f"got: [{s2[0]}, {s2[1]}].")
    _same_dtype(c, b1, b2)
    _refuse_bool("baddbmm", b1)
    _broadcastable(c, (s1[0], s1[1], s2[2]), "baddbmm")


def _same_dtype(c, m1, m2):
    dc, d1, d2 = _dtype(c), _dtype(m1), _dtype(m2)
    if d1 != d2:
        raise DtypeError(f"expected m1 and m2 to have the same dtype, but got: {_c_type(d1)} != {_c_type(d2)}")
    if dc != d1:
        raise DtypeError(f"self and mat2 must have the same dtype, but got {_type_name(dc)} and "
                         f"{_type_name(d2)}")


def _c_type(dtype):
    return {"float32": "float", "float64": "double", "int64": "long int", "int32": "int"}.get(str(dtype), str(dtype))


def _broadcastable(c, shape, op):
    try:
        if np.broadcast_shapes(_shape(c), shape) == shape:
            return
    except ValueError:
        pass
    raise ShapeError(f"The expanded size of the tensor ({shape[-1]}) must match the existing size "
                     f"({_shape(c)[-1] if _shape(c) else 1}) at non-singleton dimension {len(shape) - 1}.  Target "
                     f"sizes: {list(shape)}.  Tensor sizes: {list(_shape(c))}")


class Dot(Mul):
    """``sum(a * b)`` over two vectors: Mul's saving and backward (the 0-d grad broadcasts), one numpy call."""

    @staticmethod
    def forward(ctx, a, b):
        need_a, need_b = ctx.needs_input_grad
        if need_a or need_b:
            ctx.save_for_backward(b if need_a else None, a if need_b else None)
        return np.asarray(np.dot(a, b))


def dot(a, b):
    if _ndim(a) != 1 or _ndim(b) != 1:
        raise ShapeError(f"1D tensors expected, but got {_ndim(a)}D and {_ndim(b)}D tensors")
    na, nb = _shape(a)[0], _shape(b)[0]
    if na != nb:
        raise ShapeError(f"inconsistent tensor size, expected tensor [{na}] and src [{nb}] to have the same number "
                         f"of elements, but got {na} and {nb} elements respectively")
    if _dtype(a) != _dtype(b):
        raise DtypeError(f"dot : expected both vectors to have same dtype, but found {_type_name(_dtype(a))} and "
                         f"{_type_name(_dtype(b))}")
    _refuse_bool("dot", a)
    return Dot.apply(a, b)


class Outer(Function):
    _raw = True

    @staticmethod
    def forward(ctx, a, b):
        need_a, need_b = ctx.needs_input_grad
        if need_a or need_b:
            ctx.save_for_backward(b if need_a else None, a if need_b else None)
        a, b = promote_pair(a, b)  # PyTorch's outer is a broadcast multiply, with its promotion
        return np.multiply.outer(a, b)

    @staticmethod
    def backward(ctx, grad):
        b, a = ctx.saved_tensors
        return (grad @ b if b is not None else None), (a @ grad if a is not None else None)


def outer(a, b):
    for name, x in (("self", a), ("vec2", b)):
        if _ndim(x) != 1:
            raise ShapeError(f"outer: Expected 1-D argument {name}, but got {_ndim(x)}-D")
    return Outer.apply(a, b)


# ----- einsum --------------------------------------------------------------------------------------------------
class Einsum(Function):
    """``einsum(equation, *operands)``. The equation is normalised first (ellipses spelled out as letters, the
    implicit output made explicit); each operand's gradient is the einsum of the output gradient with the other
    operands, spread over the operand's repeated letters (diagonals) and over letters only it has."""

    _raw = True

    @staticmethod
    def forward(ctx, *operands, inputs, output, sizes):
        ctx._eq = (inputs, output, sizes)
        ctx._meta = {"equation": ",".join(inputs) + "->" + output}
        ctx._shapes = tuple(np.shape(o) for o in operands)
        if any(ctx.needs_input_grad):
            ctx.save_for_backward(*operands)
        full = [np.broadcast_to(o, tuple(sizes[c] for c in sub)) for o, sub in zip(operands, inputs)]
        eq = ",".join(inputs) + "->" + output
        return np.asarray(np.einsum(eq, *full, optimize="greedy" if len(full) > 1 else False))

    @staticmethod
    def backward(ctx, grad):
        operands = ctx.saved_tensors
        inputs, output, sizes = ctx._eq
        grads = []
        for k, sub in enumerate(inputs):
            if not ctx.needs_input_grad[k]:
                grads.append(None)
                continue
            others = [(np.broadcast_to(o, tuple(sizes[c] for c in s)), s)
                      for j, (o, s) in enumerate(zip(operands, inputs)) if j != k]
            unique = "".join(dict.fromkeys(sub))
            seen = set(output).union(*(set(s) for _, s in others))
            reachable = "".join(c for c in unique if c in seen)
            eq = ",".join([output] + [s for _, s in others]) + "->" + reachable
            g = np.einsum(eq, grad, *(o for o, _ in others), optimize="greedy" if others else False)
            g = np.broadcast_to(np.expand_dims(g, tuple(i for i, c in enumerate(unique) if c not in seen)),
                                tuple(sizes[c] for c in unique))
            grads.append(_place(g, sub, unique, ctx._shapes[k], grad.dtype))
        return tuple(grads)


def _place(g, sub, unique, shape, dtype):
    """Turn a gradient over the operand's distinct letters into one of its shape: repeated letters put it on the
    diagonal; a size-1 dim that was broadcast sums it down."""
    full = tuple(g.shape[unique.index(c)] for c in sub)
    if len(unique) != len(sub):
        out = np.zeros(full, dtype=dtype)
        strides = [0] * len(unique)
        for axis, c in enumerate(sub):
            strides[unique.index(c)] += out.strides[axis]
        np.lib.stride_tricks.as_strided(out, shape=g.shape, strides=tuple(strides))[...] = g
    else:
        out = g
    axes = tuple(i for i, (want, have) in enumerate(zip(shape, full)) if want == 1 and have != 1)
    return out.sum(axis=axes, keepdims=True) if axes else out


def _parse_einsum(equation, shapes):
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) < len(shapes):
        raise ShapeError("einsum(): more operands were provided than specified in the equation")
    if len(terms) > len(shapes):
        raise ShapeError("einsum(): fewer operands were provided than specified in the equation")
    spare = iter(c for c in string.ascii_uppercase + string.ascii_lowercase if c not in eq)
    ell_rank = max((len(s) - len(t.replace("...", "")) for t, s in zip(terms, shapes) if "..." in t), default=0)
    ell = "".join(next(spare) for _ in range(ell_rank))
    inputs = []
    for k, (term, shape) in enumerate(zip(terms, shapes)):
        if "..." in term:
            n = len(shape) - len(term.replace("...", ""))
            term = term.replace("...", ell[ell_rank - n:] if n else "")
        elif len(term) != len(shape):
            raise ShapeError(f"einsum(): the number of subscripts in the equation ({len(term)}) does not match the "
                             f"number of dimensions ({len(shape)}) for operand {k} and no ellipsis was given")
        for c in term:
            if not c.isalpha():
                raise ShapeError(f"einsum(): invalid subscript given at index {eq.index(c)} in the equation "
                                 f"string, subscripts must be in [a-zA-Z]")
        inputs.append(term)
    if arrow:
        output = rhs.replace("...", ell)
    else:
        counts = {}
        for term in inputs:
            for c in term:
                counts[c] = counts.get(c, 0) + 1
        output = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    sizes = {}
    for k, (term, shape) in enumerate(zip(inputs, shapes)):
        for c, n in zip(term, shape):
            have = sizes.get(c)
            if have is None or have == 1:
                sizes[c] = n
            elif n != 1 and n != have:
                raise ShapeError(f"einsum(): subscript {c} has size {n} for operand {k} which does not broadcast "
                                 f"with previously seen size {have}")
    for c in output:
        if c not in sizes:
            raise ShapeError(f"einsum(): output subscript {c} does not appear in the equation for any input "
                             "operand")
    return inputs, output, sizes


def einsum(equation, *operands):
    if not isinstance(equation, str):
        raise UnsupportedError("gradviz's einsum takes an equation string (einsum('ij,jk->ik', a, b)), not the "
                               "sublist form einsum(a, [0, 1], b, [1, 2])")
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    dtypes = {_dtype(o) for o in operands}
    if len(dtypes) > 1:
        first = _dtype(operands[0])
        other = next(_dtype(o) for o in operands if _dtype(o) != first)
        raise DtypeError(f"expected scalar type {_type_name(first)} but found {_type_name(other)}")
    if len(operands) > 1:
        _refuse_bool("bmm", *operands)
    inputs, output, sizes = _parse_einsum(equation, [_shape(o) for o in operands])
    return Einsum.apply(*operands, inputs=tuple(inputs), output=output, sizes=sizes)


# ----- triangles and diagonals ----------------------------------------------------------------------------------
class Tril(Function):
    _raw = True

    @staticmethod
    def forward(ctx, x, diagonal=0, upper=False):
        ctx._tri = (diagonal, upper)
        ctx._meta = {"diagonal": diagonal}
        return np.triu(x, diagonal) if upper else np.tril(x, diagonal)

    @staticmethod
    def backward(ctx, grad):
        diagonal, upper = ctx._tri
        return np.triu(grad, diagonal) if upper else np.tril(grad, diagonal)


class Triu(Tril):
    pass


def tril(x, diagonal=0, upper=False):
    check_tril(x, upper)
    return (Triu if upper else Tril).apply(x, diagonal=int(diagonal), upper=upper)


def check_tril(x, upper):
    if _ndim(x) < 2:
        raise ShapeError(f"{'triu' if upper else 'tril'}: input tensor must have at least 2 dimensions")


class Diag(Function):
    """``diag``: a vector becomes a square matrix with it on a diagonal; a matrix gives a copy of a diagonal."""

    _raw = True

    @staticmethod
    def forward(ctx, x, diagonal=0):
        ctx._in = (x.shape, diagonal)
        ctx._meta = {"diagonal": diagonal}
        if x.ndim == 1:
            return np.diag(x, diagonal)
        return diagonal_view(x, diagonal, 0, 1).copy()

    @staticmethod
    def backward(ctx, grad):
        shape, diagonal = ctx._in
        if len(shape) == 1:
            return diagonal_view(grad, diagonal, 0, 1).copy()
        out = np.zeros(shape, dtype=grad.dtype)
        diagonal_view(out, diagonal, 0, 1)[...] = grad
        return out


def diag(x, diagonal=0):
    if _ndim(x) not in (1, 2):
        raise ShapeError(f"diag(): Supports 1D or 2D tensors. Got {_ndim(x)}D")
    return Diag.apply(x, diagonal=int(diagonal))


class Trace(Function):
    """The matrix trace (the Tensor method ``trace()``; ``gradviz.trace`` is the debugger's tracer)."""

    _raw = True

    @staticmethod
    def forward(ctx, x):
        ctx._shape = x.shape
        return np.asarray(np.trace(x), dtype=np.int64 if x.dtype.kind in "iub" else x.dtype)

    @staticmethod
    def backward(ctx, grad):
        return np.eye(*ctx._shape, dtype=grad.dtype) * grad


def trace(x):
    if _ndim(x) != 2:
        raise ShapeError(f"trace: expected a matrix, but got tensor with dim {_ndim(x)}")
    _refuse_bool("trace", x)
    return Trace.apply(x)


__all__ = ["Bmm", "Addmm", "Baddbmm", "Dot", "Outer", "Einsum", "Tril", "Triu", "Diag", "Trace", "bmm", "addmm",
           "baddbmm", "dot", "outer", "einsum", "tril", "diag", "trace", "check_addmm", "check_baddbmm", "check_tril"]
