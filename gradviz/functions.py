"""Ops as top-level functions (``gradviz.exp(x)``, ``gradviz.cat([...])``…), as in the ``torch`` namespace."""

from .autograd.variable import Variable
from .factories import tensor as _tensor
from .ops import indexing as _I
from .ops import shape as _S


def _v(x):
    return x if isinstance(x, Variable) else _tensor(x)


def add(a, b, alpha=1):
    return _v(a).add(b, alpha=alpha)


def sub(a, b, alpha=1):
    return _v(a).sub(b, alpha=alpha)


def mul(a, b):
    return _v(a) * b


def div(a, b, rounding_mode=None):
    return _v(a).div(b, rounding_mode=rounding_mode)


def pow(a, exponent):
    return _v(a) ** exponent if isinstance(a, Variable) else exponent.__rpow__(a)


def neg(x):
    return -x


def matmul(a, b):
    return _v(a).matmul(b)


def mm(a, b):
    return _v(a).mm(b)


def exp(x):
    return x.exp()


def log(x):
    return x.log()


def sqrt(x):
    return x.sqrt()


def abs(x):
    return x.abs()


def sin(x):
    return x.sin()


def cos(x):
    return x.cos()


def tanh(x):
    return x.tanh()


def sigmoid(x):
    return x.sigmoid()


def relu(x):
    return x.relu()


def clamp(x, min=None, max=None):
    return x.clamp(min=min, max=max)


clip = clamp


def sum(x, dim=None, keepdim=False, dtype=None):
    return x.sum(dim=dim, keepdim=keepdim, dtype=dtype)


def mean(x, dim=None, keepdim=False):
    return x.mean(dim=dim, keepdim=keepdim)


def var(x, dim=None, unbiased=True, keepdim=False, correction=None):
    return x.var(dim=dim, unbiased=unbiased, keepdim=keepdim, correction=correction)


def std(x, dim=None, unbiased=True, keepdim=False, correction=None):
    return x.std(dim=dim, unbiased=unbiased, keepdim=keepdim, correction=correction)


def max(x, dim=None, keepdim=False):
    return x.max(dim, keepdim=keepdim)


def min(x, dim=None, keepdim=False):
    return x.min(dim, keepdim=keepdim)


def maximum(a, b):
    return a.maximum(b)


def minimum(a, b):
    return a.minimum(b)


def argmax(x, dim=None, keepdim=False):
    return x.argmax(dim=dim, keepdim=keepdim)


def argmin(x, dim=None, keepdim=False):
    return x.argmin(dim=dim, keepdim=keepdim)


def softmax(x, dim):
    return x.softmax(dim)


def log_softmax(x, dim):
    return x.log_softmax(dim)


def reshape(x, shape):
    return x.reshape(shape)


def flatten(x, start_dim=0, end_dim=-1):
    return x.flatten(start_dim, end_dim)


def transpose(x, dim0, dim1):
    return x.transpose(dim0, dim1)


def t(x):
    return x.t()


def permute(x, dims):
    return x.permute(*dims)


def squeeze(x, dim=None):
    return x.squeeze(dim)


def unsqueeze(x, dim):
    return x.unsqueeze(dim)


def cat(tensors, dim=0):
    return _S.cat(tensors, dim)


concat = cat


def stack(tensors, dim=0):
    return _S.stack(tensors, dim)


def where(condition, a=None, b=None):
    if a is None and b is None:  # torch.where(condition): the indices of the True elements, one tensor per dim
        return tuple(_tensor(i) for i in _v(condition)._data.nonzero())
    if a is None or b is None:
        raise TypeError("where() received an invalid combination of arguments: give a condition alone, or a "
                        "condition, an input and an other")
    return _I.where(condition, a, b)


def clone(x):
    return x.clone()


def detach(x):
    return x.detach()


def numel(x):
    return x.numel()


def is_tensor(x):
    return isinstance(x, Variable)


def allclose(a, b, rtol=1e-05, atol=1e-08):
    import numpy as np

    return bool(np.allclose(_v(a)._data, _v(b)._data, rtol=rtol, atol=atol))


def equal(a, b):
    return a.equal(b)


# ----- the pointwise math family, comparisons, logical ops, masked_fill (issue 8, opsa) -------------------------
# Each is the Tensor method of the same name (gradviz/autograd/variable.py, the opsa block).


def tan(input):
    return input.tan()


def asin(input):
    return input.asin()


def acos(input):
    return input.acos()


def atan(input):
    return input.atan()


def sinh(input):
    return input.sinh()


def cosh(input):
    return input.cosh()


def asinh(input):
    return input.asinh()


def acosh(input):
    return input.acosh()


def atanh(input):
    return input.atanh()


def arcsin(input):
    return input.arcsin()


def arccos(input):
    return input.arccos()


def arctan(input):
    return input.arctan()


def arcsinh(input):
    return input.arcsinh()


def arccosh(input):
    return input.arccosh()


def arctanh(input):
    return input.arctanh()


def exp2(input):
    return input.exp2()


def expm1(input):
    return input.expm1()


def log2(input):
    return input.log2()


def log10(input):
    return input.log10()


def log1p(input):
    return input.log1p()


def rsqrt(input):
    return input.rsqrt()


def square(input):
    return input.square()


def reciprocal(input):
    return input.reciprocal()


def sign(input):
    return input.sign()


def floor(input):
    return input.floor()


def ceil(input):
    return input.ceil()


def trunc(input):
    return input.trunc()


def fix(input):
    return input.fix()


def frac(input):
    return input.frac()


def erf(input):
    return input.erf()


def erfc(input):
    return input.erfc()


def erfinv(input):
    return input.erfinv()


def logical_not(input):
    return input.logical_not()


def bitwise_not(input):
    return input.bitwise_not()


def isnan(input):
    return input.isnan()


def isinf(input):
    return input.isinf()


def isfinite(input):
    return input.isfinite()


def absolute(input):
    return input.absolute()


def negative(input):
    return input.negative()


def round(input, decimals=0):  # noqa: A001 - PyTorch's name
    return input.round(decimals=decimals)


def logit(input, eps=None):
    return input.logit(eps=eps)


def atan2(input, other):
    return _v(input).atan2(other)


def arctan2(input, other):
    return _v(input).arctan2(other)


def hypot(input, other):
    return _v(input).hypot(other)


def fmod(input, other):
    return _v(input).fmod(other)


def remainder(input, other):
    return _v(input).remainder(other)


def floor_divide(input, other):
    return _v(input).floor_divide(other)


def true_divide(input, other):
    return _v(input).true_divide(other)


def logical_and(input, other):
    return _v(input).logical_and(other)


def logical_or(input, other):
    return _v(input).logical_or(other)


def logical_xor(input, other):
    return _v(input).logical_xor(other)


def bitwise_and(input, other):
    return _v(input).bitwise_and(other)


def bitwise_or(input, other):
    return _v(input).bitwise_or(other)


def bitwise_xor(input, other):
    return _v(input).bitwise_xor(other)


def eq(input, other):
    return _v(input).eq(other)


def ne(input, other):
    return _v(input).ne(other)


def lt(input, other):
    return _v(input).lt(other)


def le(input, other):
    return _v(input).le(other)


def gt(input, other):
    return _v(input).gt(other)


def ge(input, other):
    return _v(input).ge(other)


def greater(input, other):
    return _v(input).greater(other)


def greater_equal(input, other):
    return _v(input).greater_equal(other)


def less(input, other):
    return _v(input).less(other)


def less_equal(input, other):
    return _v(input).less_equal(other)


def not_equal(input, other):
    return _v(input).not_equal(other)


def divide(input, other, rounding_mode=None):
    return _v(input).div(other, rounding_mode=rounding_mode)


def lerp(input, end, weight):
    return input.lerp(end, weight)


def clamp_min(input, min):
    return input.clamp_min(min)


def clamp_max(input, max):
    return input.clamp_max(max)


def masked_fill(input, mask, value):
    return input.masked_fill(mask, value)


# The names above, for gradviz.__all__.
POINTWISE_NAMES = ["tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "arcsin", "arccos",
                   "arctan", "arcsinh", "arccosh", "arctanh", "exp2", "expm1", "log2", "log10", "log1p", "rsqrt",
                   "square", "reciprocal", "sign", "floor", "ceil", "trunc", "fix", "frac", "erf", "erfc", "erfinv",
                   "logical_not", "bitwise_not", "isnan", "isinf", "isfinite", "absolute", "negative", "round",
                   "logit", "atan2", "arctan2", "hypot", "fmod", "remainder", "floor_divide", "true_divide",
                   "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor", "eq",
                   "ne", "lt", "le", "gt", "ge", "greater", "greater_equal", "less", "less_equal", "not_equal",
                   "divide", "lerp", "clamp_min", "clamp_max", "masked_fill"]

# ----- opsb: views, rearrangements, gather/scatter, sorting, reductions, products, sampling ---------------------
from .factories import logspace, rand_like, randn_like  # noqa: E402,F401 - torch-namespace factories
from .ops import linalg as _L  # noqa: E402
from .ops import random as _random  # noqa: E402


def narrow(input, dim, start, length):
    return input.narrow(dim, start, length)


def split(tensor, split_size_or_sections, dim=0):
    return tensor.split(split_size_or_sections, dim)


def chunk(input, chunks, dim=0):
    return input.chunk(chunks, dim)


def unbind(input, dim=0):
    return input.unbind(dim)


def movedim(input, source, destination):
    return input.movedim(source, destination)


moveaxis = movedim


def unflatten(input, dim, sizes):
    return input.unflatten(dim, sizes)


def diagonal(input, offset=0, dim1=0, dim2=1):
    return input.diagonal(offset, dim1, dim2)


def tile(input, dims):
    return input.tile(dims)


def repeat_interleave(input, repeats=None, dim=None, output_size=None):
    if repeats is None:
        return _S.repeat_interleave(input)
    return input.repeat_interleave(repeats, dim)


def flip(input, dims):
    return input.flip(dims)


def roll(input, shifts, dims=None):
    return input.roll(shifts, dims)


def gather(input, dim, index):
    return input.gather(dim, index)


def scatter(input, dim, index, src=None, value=None, reduce=None):
    return input.scatter(dim, index, src, value, reduce)


def scatter_add(input, dim, index, src):
    return input.scatter_add(dim, index, src)


def index_select(input, dim, index):
    return input.index_select(dim, index)


def index_add(input, dim, index, source, alpha=1):
    return input.index_add(dim, index, source, alpha)


def take_along_dim(input, indices, dim=None):
    return input.take_along_dim(indices, dim)


def sort(input, dim=-1, descending=False, stable=False):
    return input.sort(dim, descending, stable)


def argsort(input, dim=-1, descending=False, stable=False):
    return input.argsort(dim, descending, stable)


def topk(input, k, dim=-1, largest=True, sorted=True):
    return input.topk(k, dim, largest, sorted)


def cumsum(input, dim, dtype=None):
    return input.cumsum(dim, dtype=dtype)


def cumprod(input, dim, dtype=None):
    return input.cumprod(dim, dtype=dtype)


def prod(input, dim=None, keepdim=False, dtype=None):
    return input.prod(dim, keepdim, dtype=dtype)


def logsumexp(input, dim, keepdim=False):
    return input.logsumexp(dim, keepdim)


def norm(input, p="fro", dim=None, keepdim=False, dtype=None):
    return input.norm(p, dim, keepdim, dtype)


def amax(input, dim=(), keepdim=False):
    return input.amax(dim, keepdim)


def amin(input, dim=(), keepdim=False):
    return input.amin(dim, keepdim)


def all(input, dim=None, keepdim=False):  # noqa: A001 - PyTorch's name
    return _v(input).all(dim, keepdim)


def any(input, dim=None, keepdim=False):  # noqa: A001 - PyTorch's name
    return _v(input).any(dim, keepdim)


def bmm(input, mat2):
    return _L.bmm(input, mat2)


def addmm(input, mat1, mat2, beta=1, alpha=1):
    return _L.addmm(input, mat1, mat2, beta, alpha)


def baddbmm(input, batch1, batch2, beta=1, alpha=1):
    return _L.baddbmm(input, batch1, batch2, beta, alpha)


def einsum(equation, *operands):
    return _L.einsum(equation, *operands)


def outer(input, vec2):
    return _L.outer(input, vec2)


ger = outer


def dot(input, tensor):
    return _L.dot(input, tensor)


def tril(input, diagonal=0):
    return input.tril(diagonal)


def triu(input, diagonal=0):
    return input.triu(diagonal)


def diag(input, diagonal=0):
    return input.diag(diagonal)


def multinomial(input, num_samples, replacement=False, generator=None):
    return _random.multinomial(input, num_samples, replacement, generator)


def bernoulli(input, p=None, generator=None):
    return _random.bernoulli(input, p, generator)


def normal(mean=0.0, std=1.0, size=None, generator=None, dtype=None, requires_grad=False, device=None):
    return _random.normal(mean, std, size, generator, dtype=dtype, requires_grad=requires_grad, device=device)
