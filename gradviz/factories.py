"""Tensor factories (``zeros``, ``randn``…) and the random generator ``manual_seed`` sets.

Every factory takes PyTorch's ``device=`` (the CPU, or a one-line error) and makes floats in the default dtype
(``set_default_dtype``)."""

import numpy as np

from .autograd import observer
from .autograd.variable import Variable, _to_array
from .device import as_device
from .dtypes import as_dtype, default_float, int64
from .generator import Generator, default_generator


def manual_seed(seed):
    """Seed gradviz's default generator (used by rand*, parameter initialisation, dropout and shuffling);
    returns it, as PyTorch does."""
    return default_generator.manual_seed(seed)


def _rng(generator=None):
    """The numpy generator behind ``generator`` (a ``gradviz.Generator``), or the default one."""
    if generator is None:
        return default_generator._rng
    if not isinstance(generator, Generator):
        raise TypeError(f"expected a torch.Generator, but got {type(generator).__name__}")
    return generator._rng


def _float(dtype):
    """``dtype`` resolved, or the default float dtype."""
    return as_dtype(dtype) or default_float()


def _shape(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        return tuple(int(s) for s in size[0])
    return tuple(int(s) for s in size)


def _make(array, requires_grad=False, origin="factory"):
    v = Variable.__new__(Variable)
    v._init(array)
    if requires_grad:
        v.requires_grad = True
    obs = observer._observers.get()
    if obs:
        for o in obs:
            try:
                o.on_variable(v, origin)
            except Exception as failure:
                o.callback_failed("on_variable", failure)
    return v


def tensor(data, requires_grad=False, dtype=None, device=None):
    """A new leaf holding a copy of ``data`` (PyTorch's ``torch.tensor``)."""
    as_device(device)
    return _make(_to_array(data, as_dtype(dtype), copy=True), requires_grad, "new")


def as_tensor(data, dtype=None, device=None):
    as_device(device)
    return _make(_to_array(data, as_dtype(dtype)), False, "new")


def from_numpy(array):
    """A Variable sharing ``array``'s memory (PyTorch's ``torch.from_numpy``)."""
    return _make(np.asarray(array), False, "new")


def zeros(*size, requires_grad=False, dtype=None, device=None):
    as_device(device)
    return _make(np.zeros(_shape(size), dtype=_float(dtype)), requires_grad)


def ones(*size, requires_grad=False, dtype=None, device=None):
    as_device(device)
    return _make(np.ones(_shape(size), dtype=_float(dtype)), requires_grad)


def empty(*size, requires_grad=False, dtype=None, device=None):
    as_device(device)
    return _make(np.empty(_shape(size), dtype=_float(dtype)), requires_grad)


def full(size, fill_value, requires_grad=False, dtype=None, device=None):
    as_device(device)
    dtype = as_dtype(dtype) or (default_float() if isinstance(fill_value, float) else None)
    return _make(np.full(_shape((size,)), fill_value, dtype=dtype) if dtype is not None
                 else _to_array(np.full(_shape((size,)), fill_value)), requires_grad)


def zeros_like(x, requires_grad=False, dtype=None, device=None):
    as_device(device)
    return _make(np.zeros(x.shape, dtype=as_dtype(dtype) or x.dtype), requires_grad)


def ones_like(x, requires_grad=False, dtype=None, device=None):
    as_device(device)
    return _make(np.ones(x.shape, dtype=as_dtype(dtype) or x.dtype), requires_grad)


def full_like(x, fill_value, requires_grad=False, dtype=None, device=None):
    as_device(device)
    return _make(np.full(x.shape, fill_value, dtype=as_dtype(dtype) or x.dtype), requires_grad)


def eye(n, m=None, requires_grad=False, dtype=None, device=None):
    as_device(device)
    return _make(np.eye(n, m, dtype=_float(dtype)), requires_grad)


def arange(start, end=None, step=1, requires_grad=False, dtype=None, device=None):
    as_device(device)
    if end is None:
        start, end = 0, start
    values = np.arange(start, end, step)
    dtype = as_dtype(dtype) or (int64 if values.dtype.kind in "iu" else default_float())
    return _make(values.astype(dtype), requires_grad)


def linspace(start, end, steps, requires_grad=False, dtype=None, device=None):
    as_device(device)
    return _make(np.linspace(start, end, int(steps)).astype(_float(dtype)), requires_grad)


def rand(*size, generator=None, requires_grad=False, dtype=None, device=None):
    as_device(device)
    return _make(_rng(generator).random(_shape(size)).astype(_float(dtype)), requires_grad)


def randn(*size, generator=None, requires_grad=False, dtype=None, device=None):
    as_device(device)
    return _make(_rng(generator).standard_normal(_shape(size)).astype(_float(dtype)), requires_grad)


def randint(low, high=None, size=None, *, generator=None, dtype=None, device=None, requires_grad=False):
    as_device(device)
    if size is None and isinstance(high, (tuple, list)):
        low, high, size = 0, low, high  # randint(high, size)
    if high is None:
        low, high = 0, low
    if size is None:
        raise TypeError("randint() missing required argument 'size'")
    return _make(_rng(generator).integers(low, high, size=_shape((size,))).astype(as_dtype(dtype) or int64),
                 requires_grad)


def randperm(n, *, generator=None, dtype=None, device=None, requires_grad=False):
    as_device(device)
    return _make(_rng(generator).permutation(int(n)).astype(as_dtype(dtype) or int64), requires_grad)


# ----- opsb: logspace and the random *_like factories -----------------------------------------------------------
def _cpu_only(device):
    """``device=`` as the factories take it: the CPU only (another device is ``DeviceError``, one line)."""
    as_device(device)


def logspace(start, end, steps, base=10.0, requires_grad=False, dtype=None, device=None):
    from .dtypes import default_float

    _cpu_only(device)
    values = np.power(float(base), np.linspace(float(start), float(end), int(steps)))
    return _make(values.astype(as_dtype(dtype) or default_float()), requires_grad)


def _float_like(x, dtype, kernel):
    dtype = as_dtype(dtype) or x.dtype
    if dtype.kind not in "fc":
        names = {"int64": "Long", "int32": "Int", "bool": "Bool", "uint8": "Byte"}
        raise NotImplementedError(f'"{kernel}" not implemented for \'{names.get(str(dtype), str(dtype))}\'')
    return dtype


def rand_like(x, requires_grad=False, dtype=None, device=None):
    _cpu_only(device)
    dtype = _float_like(x, dtype, "check_uniform_bounds")
    return _make(_rng().random(x.shape).astype(dtype), requires_grad)


def randn_like(x, requires_grad=False, dtype=None, device=None):
    _cpu_only(device)
    dtype = _float_like(x, dtype, "normal_kernel_cpu")
    return _make(_rng().standard_normal(x.shape).astype(dtype), requires_grad)
