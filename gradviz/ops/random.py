"""Sampling ops on gradviz's generator (``manual_seed`` makes them reproducible; the stream is not PyTorch's).

``normal`` and ``bernoulli`` are differentiable with a zero gradient, as in PyTorch: a sample does not move
with its parameters (no reparametrisation)."""

import numpy as np

from ..autograd.function import Function
from ..autograd.variable import Variable
from ..dtypes import result_type
from ..factories import _rng


def _sampler(generator):
    """The numpy generator to draw from: gradviz's default one, or the ``gradviz.Generator`` given."""
    if generator is None:
        return _rng()
    rng = getattr(generator, "_rng", None)
    if rng is None:
        raise TypeError(f"expected a torch.Generator, but got {type(generator).__name__}")
    return rng


class Normal(Function):
    _raw = True

    @staticmethod
    def forward(ctx, mean, std, dtype, generator=None):
        if np.any(np.asarray(std) < 0):
            raise RuntimeError("normal expects all elements of std >= 0.0")
        shape = np.broadcast_shapes(np.shape(mean), np.shape(std))
        return np.asarray(_sampler(generator).normal(mean, std, shape), dtype=dtype)

    @staticmethod
    def backward(ctx, grad):
        return np.zeros_like(grad), np.zeros_like(grad)


def normal(mean=0.0, std=1.0, size=None, generator=None, dtype=None, requires_grad=False, device=None):
    from ..dtypes import as_dtype, default_float
    from ..factories import _cpu_only

    _cpu_only(device)

    if isinstance(mean, Variable) or isinstance(std, Variable):
        if size is not None:
            raise TypeError("normal(): size is only accepted when mean and std are numbers")
        tensors = [t for t in (mean, std) if isinstance(t, Variable)]
        out_dtype = result_type(*tensors)
        if out_dtype.kind not in "fc":
            raise NotImplementedError(f"\"normal_kernel_cpu\" not implemented for '{out_dtype}'")
        return Normal.apply(mean, std, dtype=out_dtype, generator=generator)
    if size is None:
        raise TypeError("normal() received an invalid combination of arguments: with numbers for mean and std, "
                        "size is required")
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
    shape = tuple(size) if isinstance(size, (tuple, list)) else (int(size),)
    out = Variable(_sampler(generator).normal(mean, std, shape).astype(as_dtype(dtype) or default_float()))
    return out.requires_grad_() if requires_grad else out


class Bernoulli(Function):
    _raw = True

    @staticmethod
    def forward(ctx, p, generator=None):
        if p.size and (np.min(p) < 0 or np.max(p) > 1):
            raise RuntimeError("Expected p_in >= 0 && p_in <= 1 to be true, but got false.")
        return (_sampler(generator).random(p.shape) < p).astype(p.dtype)

    @staticmethod
    def backward(ctx, grad):
        return np.zeros_like(grad)


def bernoulli(x, p=None, generator=None):
    if p is not None:
        probs = np.broadcast_to(np.asarray(p, dtype=x._data.dtype), x._data.shape)
        return Variable((_sampler(generator).random(probs.shape) < probs).astype(x._data.dtype))
    return Bernoulli.apply(x, generator=generator)


def bernoulli_fill(x, p=0.5, generator=None):
    """``Tensor.bernoulli_(p)``: fill ``x`` with 0/1 draws of probability ``p`` (a number or a tensor)."""
    from ..autograd.inplace import apply_inplace
    from .indexing import Fill

    probs = p._data if isinstance(p, Variable) else np.asarray(p)
    if probs.size and (np.min(probs) < 0 or np.max(probs) > 1):
        raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={p}")
    draws = _sampler(generator).random(x._data.shape) < np.broadcast_to(probs, x._data.shape)
    return apply_inplace(Fill, x, value=draws.astype(x._data.dtype))


def multinomial(x, num_samples, replacement=False, generator=None):
    """Category indices drawn with probabilities proportional to each row of ``x`` (1-D or 2-D), int64."""
    w = x._data
    if w.ndim not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    rows = w.reshape(1, -1) if w.ndim == 1 else w
    n = rows.shape[1]
    num_samples = int(num_samples)
    if num_samples <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    if not replacement and num_samples > n:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    if not np.all(np.isfinite(rows)) or np.any(rows < 0):
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    totals = rows.sum(axis=1, dtype=np.float64)
    if np.any(totals <= 0):
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    rng = _sampler(generator)
    if replacement:
        # Row r's cumulative distribution shifted into [r, r + 1]: one searchsorted serves every row.
        cdf = np.cumsum(rows, axis=1, dtype=np.float64) / totals[:, None]
        cdf[:, -1] = 1.0
        offsets = np.arange(rows.shape[0])[:, None]
        u = rng.random((rows.shape[0], num_samples)) + offsets
        picks = np.searchsorted((cdf + offsets).reshape(-1), u.reshape(-1), side="right").reshape(u.shape)
        picks = np.minimum(picks - offsets * n, n - 1)
    else:
        # Efraimidis-Spirakis: the k largest keys u ** (1 / w) are a weighted sample without replacement;
        # categories of weight 0 get key -1 and come last, as PyTorch takes them only when it must.
        with np.errstate(divide="ignore"):
            keys = np.where(rows > 0, np.log(rng.random(rows.shape)) / rows, -np.inf)
        order = np.argsort(-keys, axis=1, kind="stable")
        picks = order[:, :num_samples]
    picks = picks.astype(np.int64)
    return Variable(picks.reshape(-1) if w.ndim == 1 else picks)


__all__ = ["Normal", "Bernoulli", "normal", "bernoulli", "bernoulli_fill", "multinomial"]
