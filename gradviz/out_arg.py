"""PyTorch's ``out=`` keyword for top-level ops (``torch.add(x, y, out=r)``), around any op that lacks one.

The op runs as usual, then its result is written into ``out`` in place (a version bump, seen by observers like
any ``copy_``) and ``out`` is returned, with PyTorch's rules: no autograd through ``out=`` (an input or ``out``
requiring grad while grad mode is on raises PyTorch's error), the result's dtype must be castable to ``out``'s
(``can_cast``), and an ``out`` of another shape is resized (with PyTorch's warning when it was not empty).
Ops returning several tensors (``sort``, ``max(dim)``, ``topk``) take a tuple of as many ``out`` tensors.
"""

import functools
import inspect
import warnings

import numpy as np

from .autograd.grad_mode import is_grad_enabled, no_grad
from .autograd.variable import Variable
from .dtypes import can_cast
from .errors import UnsupportedError

_TYPE_NAMES = {"float32": "Float", "float64": "Double", "int64": "Long", "int32": "Int", "bool": "Bool",
               "uint8": "Byte"}
RESIZE_WARNING = (
    "An output with one or more elements was resized since it had shape {old}, which does not match the required "
    "output shape {new}. This behavior is deprecated, and in a future PyTorch release outputs will not be resized "
    "unless they have zero elements. You can explicitly reuse an out tensor t by resizing it, inplace, to zero "
    "elements with t.resize_(0).")


def accepts_out(fn):
    """Whether ``fn`` handles ``out=`` itself (or takes ``**kwargs``), so it needs no wrapping."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return True  # not introspectable: leave it alone
    return any(p.name == "out" or p.kind is p.VAR_KEYWORD for p in params)


def with_out(fn, name=None):
    """``fn`` with an ``out=`` keyword; ``name`` is the op's name in messages (``add``)."""
    op_name = name or fn.__name__

    @functools.wraps(fn)
    def wrapper(*args, out=None, **kwargs):
        if out is None:
            return fn(*args, **kwargs)
        _check_no_grad(op_name, args, kwargs, out)
        result = fn(*args, **kwargs)
        return _write(op_name, result, out)

    return wrapper


def _tensors(values):
    for v in values:
        if isinstance(v, Variable):
            yield v
        elif isinstance(v, (list, tuple)):
            yield from (x for x in v if isinstance(x, Variable))


def _check_no_grad(op_name, args, kwargs, out):
    outs = out if isinstance(out, (tuple, list)) else (out,)
    for o in outs:
        if not isinstance(o, Variable):
            raise TypeError(f"{op_name}(): argument 'out' must be Tensor, not {type(o).__name__}")
    if is_grad_enabled() and any(t.requires_grad for t in _tensors([*args, *kwargs.values(), *outs])):
        raise RuntimeError(f"{op_name}(): functions with out=... arguments don't support automatic "
                           "differentiation, but one of the arguments requires grad.")


def _write(op_name, result, out):
    if isinstance(result, Variable) and isinstance(out, Variable):
        _write_one(result, out)
        return out
    if isinstance(result, tuple) and all(isinstance(r, Variable) for r in result):
        if not isinstance(out, (tuple, list)) or len(out) != len(result):
            raise TypeError(f"{op_name}(): argument 'out' must be tuple of {len(result)} Tensors")
        for r, o in zip(result, out):
            _write_one(r, o)
        return type(result)(out) if hasattr(result, "_fields") else tuple(out)
    if isinstance(result, (Variable, tuple)):
        raise TypeError(f"{op_name}(): argument 'out' must be a single Tensor")
    raise TypeError(f"{op_name}() got an unexpected keyword argument 'out'")


def _write_one(result, out):
    src, dst = result._data.dtype, out._data.dtype
    if not can_cast(src, dst):
        raise RuntimeError(f"result type {_TYPE_NAMES.get(str(src), src)} can't be cast to the desired output "
                           f"type {_TYPE_NAMES.get(str(dst), dst)}")
    if tuple(out.shape) != tuple(result.shape):
        if out._base is not None:
            raise UnsupportedError("out= given a view whose shape differs from the result's (gradviz cannot "
                                   "resize a view's storage)", torch_name="out=")
        if out._data.size:
            warnings.warn(RESIZE_WARNING.format(old=list(out.shape), new=list(result.shape)), UserWarning,
                          stacklevel=4)
        out._data = np.zeros(result._data.shape, dtype=dst)
    with no_grad():
        out.copy_(result)
