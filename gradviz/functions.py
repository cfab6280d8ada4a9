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


def div(a, b):
    return _v(a) / b


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


def var(x, dim=None, unbiased=True, keepdim=False):
    return x.var(dim=dim, unbiased=unbiased, keepdim=keepdim)


def std(x, dim=None, unbiased=True, keepdim=False):
    return x.std(dim=dim, unbiased=unbiased, keepdim=keepdim)


def max(x, dim=None, keepdim=False):
    return x.max(dim, keepdim=keepdim)


def min(x, dim=None, keepdim=False):
    return x.min(dim, keepdim=keepdim)


def maximum(a, b):
    return a.max(b)


def minimum(a, b):
    return a.min(b)


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


def where(condition, a, b):
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
