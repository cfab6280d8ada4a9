"""Run a plain PyTorch script on real PyTorch with its random numbers drawn the way gradviz's engine draws them.

``python tests/aligned_torch.py SCRIPT [ARGS...]`` installs the patches below, then runs SCRIPT as ``__main__``
(``runpy``), unmodified (``--many SCRIPT...`` runs several in turn in one process and prints their outputs as
JSON). The script under ``gradviz run --torch`` and the script here then see the same random
numbers, draw for draw, so what they print can be compared to float tolerance.

gradviz draws everything from a numpy ``default_rng(seed)`` (``gradviz.generator``): ``manual_seed(s)`` makes a
fresh one, ``torch.Generator`` objects own one each (seeded 67280421310721 until ``manual_seed``). The patches
give real torch the same numpy generators and replace each random source a tutorial script reaches with the
numpy call gradviz makes for it, in float64 and then cast to the tensor's dtype as gradviz does:

- factories: ``torch.randn``/``rand``/``randint``/``randperm``/``rand_like``/``randn_like``/``normal``/``bernoulli``
  and ``multinomial`` (``gradviz/factories.py``, ``gradviz/ops/random.py``);
- in-place fills: ``Tensor.uniform_``/``normal_``/``bernoulli_``, which ``torch.nn.init`` (and so every layer's
  ``reset_parameters``) goes through (``gradviz/nn/init.py``, ``Variable.uniform_``);
- dropout masks: ``F.dropout`` (every ``nn.Dropout``, and attention's weights dropout when ``need_weights=True``)
  and ``F.dropout2d`` (``gradviz/ops/nn_ops.py`` ``Dropout``, ``gradviz/ops/nn_layers.py`` ``FeatureDropout``);
- shuffling: ``RandomSampler`` (``DataLoader(shuffle=True)``) and ``random_split`` (``gradviz/utils/data``).

What this cannot align, and scripts compared exactly must avoid: dropout inside PyTorch's fused kernels (an
LSTM/GRU's ``dropout=`` between layers, ``scaled_dot_product_attention``'s ``dropout_p``, which attention uses
when ``need_weights=False`` - a ``TransformerEncoderLayer`` with ``dropout > 0`` in training), and any random
source not listed above.
"""

import runpy
import sys

import numpy as np
import torch
import torch.nn.functional as F
import torch.utils.data.dataset as _dataset
import torch.utils.data.sampler as _sampler

GRADVIZ_FRESH_SEED = 67280421310721  # gradviz.generator.DEFAULT_SEED (PyTorch's own fresh-generator seed)

_default = {"rng": np.random.default_rng()}
_original = {"manual_seed": torch.manual_seed, "Generator": torch.Generator}


def _seeded(seed):
    return np.random.default_rng(int(seed) % 2**64)


class AlignedGenerator(_original["Generator"]):
    """A ``torch.Generator`` that also owns the numpy generator gradviz's ``Generator`` would."""

    def __init__(self, device="cpu"):  # torch's Generator takes the device in __new__
        self._numpy = _seeded(GRADVIZ_FRESH_SEED)

    def manual_seed(self, seed):
        self._numpy = _seeded(seed)
        return super().manual_seed(seed)


def manual_seed(seed):
    _default["rng"] = _seeded(seed)
    return _original["manual_seed"](seed)


def rng(generator=None):
    """The numpy generator gradviz would draw from for ``generator`` (None or torch's default: the default one)."""
    return getattr(generator, "_numpy", None) or _default["rng"]


def _numpy_dtype(dtype, fallback=None):
    dtype = dtype or fallback or torch.get_default_dtype()
    return torch.empty((), dtype=dtype).numpy().dtype


def _shape(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)):
        return tuple(int(s) for s in size[0])
    return tuple(int(s) for s in size)


def _tensor(array, requires_grad=False):
    out = torch.from_numpy(np.ascontiguousarray(array))
    return out.requires_grad_() if requires_grad else out


def randn(*size, generator=None, dtype=None, requires_grad=False, device=None, **_):
    return _tensor(rng(generator).standard_normal(_shape(size)).astype(_numpy_dtype(dtype)), requires_grad)


def rand(*size, generator=None, dtype=None, requires_grad=False, device=None, **_):
    return _tensor(rng(generator).random(_shape(size)).astype(_numpy_dtype(dtype)), requires_grad)


def randint(low, high=None, size=None, *, generator=None, dtype=None, requires_grad=False, device=None, **_):
    if size is None and isinstance(high, (tuple, list, torch.Size)):
        low, high, size = 0, low, high
    if high is None:
        low, high = 0, low
    draws = rng(generator).integers(low, high, size=_shape((size,)))
    return _tensor(draws.astype(_numpy_dtype(dtype, torch.int64)), requires_grad)


def randperm(n, *, generator=None, dtype=None, requires_grad=False, device=None, **_):
    return _tensor(rng(generator).permutation(int(n)).astype(_numpy_dtype(dtype, torch.int64)), requires_grad)


def rand_like(x, *, dtype=None, requires_grad=False, device=None, **_):
    return _tensor(_default["rng"].random(tuple(x.shape)).astype(_numpy_dtype(dtype, x.dtype)), requires_grad)


def randn_like(x, *, dtype=None, requires_grad=False, device=None, **_):
    draws = _default["rng"].standard_normal(tuple(x.shape))
    return _tensor(draws.astype(_numpy_dtype(dtype, x.dtype)), requires_grad)


def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, requires_grad=False, device=None, **_):
    if isinstance(mean, torch.Tensor) or isinstance(std, torch.Tensor):
        tensors = [t for t in (mean, std) if isinstance(t, torch.Tensor)]
        out_dtype = torch.result_type(*tensors) if len(tensors) == 2 else tensors[0].dtype
        m = mean.detach().numpy() if isinstance(mean, torch.Tensor) else mean
        s = std.detach().numpy() if isinstance(std, torch.Tensor) else std
        shape = np.broadcast_shapes(np.shape(m), np.shape(s))
        return _tensor(np.asarray(rng(generator).normal(m, s, shape), dtype=_numpy_dtype(out_dtype)))
    shape = tuple(size) if isinstance(size, (tuple, list, torch.Size)) else (int(size),)
    return _tensor(rng(generator).normal(mean, std, shape).astype(_numpy_dtype(dtype)), requires_grad)


def bernoulli(x, p=None, *, generator=None, **_):
    probs = x.detach().numpy() if p is None else np.broadcast_to(np.asarray(p, dtype=x.detach().numpy().dtype),
                                                                  tuple(x.shape))
    return _tensor((rng(generator).random(probs.shape) < probs).astype(probs.dtype))


def multinomial(input, num_samples, replacement=False, *, generator=None, **_):
    """gradviz's draws (``gradviz/ops/random.py``): with replacement, one uniform per sample searched in each
    row's cumulative distribution; without, the largest keys ``log(u) / p`` (Efraimidis-Spirakis)."""
    w = input.detach().numpy()
    rows = w.reshape(1, -1) if w.ndim == 1 else w
    n, sampler = rows.shape[1], rng(generator)
    if replacement:
        cdf = np.cumsum(rows, axis=1, dtype=np.float64) / rows.sum(axis=1, dtype=np.float64)[:, None]
        cdf[:, -1] = 1.0
        offsets = np.arange(rows.shape[0])[:, None]
        u = sampler.random((rows.shape[0], int(num_samples))) + offsets
        picks = np.searchsorted((cdf + offsets).reshape(-1), u.reshape(-1), side="right").reshape(u.shape)
        picks = np.minimum(picks - offsets * n, n - 1)
    else:
        with np.errstate(divide="ignore"):
            keys = np.where(rows > 0, np.log(sampler.random(rows.shape)) / rows, -np.inf)
        picks = np.argsort(-keys, axis=1, kind="stable")[:, :int(num_samples)]
    picks = picks.astype(np.int64)
    return _tensor(picks.reshape(-1) if w.ndim == 1 else picks)


def _fill(tensor, values):
    with torch.no_grad():
        tensor.copy_(torch.from_numpy(np.asarray(values, dtype=_numpy_dtype(tensor.dtype))))
    return tensor


def uniform_(self, a=0.0, b=1.0, *, generator=None):
    return _fill(self, rng(generator).uniform(a, b, tuple(self.shape)))


def normal_(self, mean=0.0, std=1.0, *, generator=None):
    return _fill(self, rng(generator).normal(mean, std, tuple(self.shape)))


def bernoulli_(self, p=0.5, *, generator=None):
    probs = p.detach().numpy() if isinstance(p, torch.Tensor) else np.asarray(p)
    return _fill(self, rng(generator).random(tuple(self.shape)) < np.broadcast_to(probs, tuple(self.shape)))


def _masked(input, scaled, inplace):
    mask = torch.from_numpy(scaled)
    return input.mul_(mask) if inplace else input * mask


def dropout(input, p=0.5, training=True, inplace=False):
    if p < 0 or p > 1:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training:
        return input
    dtype = _numpy_dtype(input.dtype)
    if p == 1:
        scaled = np.zeros(tuple(input.shape), dtype=dtype)
    else:
        keep = _default["rng"].random(tuple(input.shape), dtype=np.float32 if dtype == np.float32 else np.float64)
        scaled = (keep >= p).astype(dtype) * dtype.type(1.0 / (1.0 - p))
    return _masked(input, scaled, inplace)


def dropout2d(input, p=0.5, training=True, inplace=False):
    if p < 0 or p > 1:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training:
        return input
    dtype = _numpy_dtype(input.dtype)
    mask_shape = tuple(input.shape[:2]) + (1,) * (input.dim() - 2)
    if p == 1:
        scaled = np.zeros(mask_shape, dtype=dtype)
    else:
        scaled = (_default["rng"].random(mask_shape) >= p).astype(dtype) * dtype.type(1.0 / (1.0 - p))
    return _masked(input, scaled, inplace)


def _random_sampler_iter(self):
    generator, n = rng(self.generator), len(self.data_source)
    if self.replacement:
        yield from generator.integers(0, n, size=self.num_samples).tolist()
        return
    for _ in range(self.num_samples // n):
        yield from generator.permutation(n).tolist()
    yield from generator.permutation(n).tolist()[:self.num_samples % n]


def install():
    """Patch torch in place (for the life of the process)."""
    torch.manual_seed = manual_seed
    torch.random.manual_seed = manual_seed
    torch.Generator = AlignedGenerator
    for name in ("randn", "rand", "randint", "randperm", "rand_like", "randn_like", "normal", "bernoulli",
                 "multinomial"):
        setattr(torch, name, globals()[name])
    torch.Tensor.multinomial = lambda self, *args, **kwargs: multinomial(self, *args, **kwargs)
    _dataset.randperm = randperm  # random_split's own binding of torch.randperm
    torch.Tensor.uniform_ = uniform_
    torch.Tensor.normal_ = normal_
    torch.Tensor.bernoulli_ = bernoulli_
    F.dropout = dropout
    F.dropout2d = dropout2d
    _sampler.RandomSampler.__iter__ = _random_sampler_iter


def run_many(paths):
    """Run each script in turn in this process (PyTorch imported once): a JSON object on stdout mapping each path
    to its stdout, stderr and exit status, as ``python tests/aligned_torch.py SCRIPT`` would give them."""
    import contextlib
    import io
    import json
    import traceback

    results = {}
    for path in paths:
        out, err, status = io.StringIO(), io.StringIO(), 0
        saved_argv, saved_path = list(sys.argv), list(sys.path)
        sys.argv = [path]
        sys.path.insert(0, str(__import__("pathlib").Path(path).resolve().parent))
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    runpy.run_path(path, run_name="__main__")
                except SystemExit as exc:
                    status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
                except Exception:  # the script's own error, reported as python would
                    traceback.print_exc()
                    status = 1
        finally:
            sys.argv, sys.path[:] = saved_argv, saved_path
            torch.set_grad_enabled(True)
        results[path] = {"stdout": out.getvalue(), "stderr": err.getvalue(), "status": status}
    json.dump(results, sys.stdout)
    return 0


def main(argv):
    if not argv:
        print("usage: python tests/aligned_torch.py SCRIPT [ARGS...] | --many SCRIPT...", file=sys.stderr)
        return 2
    install()
    if argv[0] == "--many":
        return run_many(argv[1:])
    sys.argv = list(argv)
    sys.path.insert(0, str(__import__("pathlib").Path(argv[0]).resolve().parent))
    runpy.run_path(argv[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
