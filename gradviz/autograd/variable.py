"""``Variable`` (also ``gradviz.Tensor``): a numpy array with autograd history and PyTorch's behaviour.

``.data`` is a Variable that shares this one's memory but not its version counter and never requires grad,
exactly as in PyTorch: changes made through it are invisible to autograd's in-place checks. ``detach()``
shares memory *and* the version counter, so in-place changes through it are caught.
"""

import warnings
import weakref

import numpy as np

from ..dtypes import as_dtype as _as_dtype
from ..dtypes import default_float
from ..errors import DtypeError, UnsupportedError, UnsupportedTensorAttribute
from . import grad_mode, observer

_grad_enabled = grad_mode._grad_enabled
_observers = observer._observers
_warned_volatile = False

NON_LEAF_GRAD_WARNING = (
    "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad attribute won't be "
    "populated during autograd.backward(). If you indeed want the .grad field to be populated for a non-leaf "
    "Tensor, use .retain_grad() on the non-leaf Tensor. If you access the non-leaf Tensor by mistake, make sure "
    "you access the leaf Tensor instead."
)


class VersionCounter:
    """Counts in-place changes to one storage; shared by a base, its views and its detached copies."""

    __slots__ = ("value",)

    def __init__(self):
        self.value = 0


class RemovableHandle:
    """What ``register_hook`` returns; ``remove()`` unregisters the hook."""

    _next_id = 0

    def __init__(self, variable, registry, fn):
        RemovableHandle._next_id += 1
        self.id = RemovableHandle._next_id
        self.variable = weakref.ref(variable)
        self._registry = registry  # a dict id -> (handle, fn) or a list of (handle, fn)
        self.fn = fn

    def remove(self):
        reg = self._registry
        if isinstance(reg, dict):
            reg.pop(self.id, None)
        else:
            reg[:] = [entry for entry in reg if entry[0] is not self]
        var = self.variable()
        obs = _observers.get()
        if obs:
            for o in obs:
                try:
                    o.on_hook(var, self.fn, "remove")
                except Exception as failure:
                    o.callback_failed("on_hook", failure)


def _to_array(data, dtype=None, copy=False):
    """Convert user data to a numpy array with PyTorch's default dtypes (float32 for floats)."""
    if isinstance(data, Variable):
        data = data._data
    if isinstance(data, np.ndarray):
        arr = data
        if dtype is not None and arr.dtype != dtype:
            return arr.astype(dtype)
        return arr.copy() if copy else arr
    if isinstance(data, np.generic):
        arr = np.array(data)
    else:
        arr = np.array(_unwrap_nested(data))
    if dtype is not None:
        return arr.astype(dtype, copy=False)
    if arr.dtype.kind == "f":
        return arr.astype(default_float(), copy=False)
    if arr.dtype.kind in "iu":
        return arr.astype(np.int64, copy=False)
    if arr.dtype == object:
        raise TypeError(f"could not convert {type(data).__name__} to a tensor")
    return arr


def _unwrap_nested(data):
    if isinstance(data, (list, tuple)):
        return [_unwrap_nested(d) for d in data]
    if isinstance(data, Variable):
        return data._data
    return data


class Variable:
    """A tensor that records the operations applied to it (PyTorch's ``Tensor``/``Variable``)."""

    __slots__ = ("_data", "_requires_grad", "_grad", "_grad_fn", "_output_nr", "_vc", "_base", "_view_chain",
                 "_view_version", "_volatile", "_hooks", "_acc_ref", "_name", "__weakref__")
    __array_ufunc__ = None  # numpy defers to our reflected operators: ndarray + Variable -> Variable
    __hash__ = object.__hash__  # == is elementwise, yet Variables stay usable as dict keys

    def __init__(self, data=None, *sizes, requires_grad=False, volatile=False, name=None, dtype=None,
                 device=None):
        if device is not None:
            _as_device(device)
        if _is_size(data, sizes):
            # the legacy size constructor, torch.Tensor(5, 3): uninitialised, in the default float dtype
            data = np.empty(_legacy_size(data, sizes), dtype=as_dtype(dtype) or default_float())
        elif sizes:
            requires_grad, volatile = _old_positional_flags(sizes, volatile)
        if data is None:
            data = np.zeros(0, dtype=as_dtype(dtype) or default_float())
        elif dtype is None and isinstance(data, (list, tuple, float, int)):
            dtype = default_float()  # torch.Tensor([1, 2]) is a float tensor, as every legacy constructor
        source = data if isinstance(data, Variable) else None
        self._init(_to_array(data, dtype))
        if source is not None and self._data is source._data:
            self._vc = source._vc  # aliasing the same storage: in-place changes must stay visible
        self._name = name
        if volatile:
            _warn_volatile()
            self._volatile = True
        if requires_grad:
            self.requires_grad = True
        obs = _observers.get()
        if obs:
            for o in obs:
                try:
                    o.on_variable(self, "new")
                except Exception as failure:
                    o.callback_failed("on_variable", failure)

    def _init(self, array):
        """Fast constructor used by ops: no checks, no observer call."""
        self._data = array
        self._requires_grad = False
        self._grad = None
        self._grad_fn = None
        self._output_nr = 0
        self._vc = VersionCounter()
        self._base = None
        self._view_chain = ()
        self._view_version = 0
        self._volatile = False
        self._hooks = None
        self._acc_ref = None
        self._name = None

    # ----- autograd state ----------------------------------------------------------------------------
    @property
    def data(self):
        v = Variable.__new__(Variable)
        v._init(self._data)
        obs = _observers.get()
        if obs:
            for o in obs:
                try:
                    o.on_detach(self, v, "data")
                except Exception as failure:
                    o.callback_failed("on_detach", failure)
        return v

    @data.setter
    def data(self, value):
        array = value._data if isinstance(value, Variable) else np.asarray(value)
        if array.shape != self._data.shape or array.dtype != self._data.dtype:
            self._data = array  # PyTorch allows swapping in data of another shape
        else:
            self._data = array

    @property
    def requires_grad(self):
        if self._base is not None and self._view_version != self._vc.value:
            self._sync_view()
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value):
        value = bool(value)
        if self._grad_fn is not None:
            if not value:
                raise RuntimeError(
                    "you can only change requires_grad flags of leaf variables. If you want to use a computed "
                    "variable in a subgraph that doesn't require differentiation use var_no_grad = var.detach().")
            raise RuntimeError("you can only change requires_grad flags of leaf variables.")
        if value and self._data.dtype.kind not in "fc":
            raise DtypeError("only Tensors of floating point and complex dtype can require gradients "
                             f"(this one is {self._data.dtype})")
        self._requires_grad = value

    def requires_grad_(self, requires_grad=True):
        if requires_grad and self._grad_fn is not None:
            return self  # PyTorch: a no-op on a non-leaf (the attribute setter raises instead)
        if requires_grad and self._data.dtype.kind not in "fc":  # PyTorch's wording differs from the setter's
            raise DtypeError(f"only Tensors of floating point dtype can require gradients (this one is "
                             f"{self._data.dtype})")
        self.requires_grad = requires_grad
        return self

    @property
    def volatile(self):
        return self._volatile

    @volatile.setter
    def volatile(self, value):
        _warn_volatile()
        self._volatile = bool(value)

    @property
    def grad(self):
        g = self._grad
        if g is None and self._grad_fn is not None and not self.retains_grad:
            warnings.warn(NON_LEAF_GRAD_WARNING, UserWarning, stacklevel=2)
        obs = _observers.get()
        if obs:
            for o in obs:
                try:
                    o.on_grad_read(self, g)
                except Exception as failure:
                    o.callback_failed("on_grad_read", failure)
        return g

    @grad.setter
    def grad(self, value):
        if value is not None:
            if not isinstance(value, Variable):
                raise TypeError(f"assigned grad expected to be a Tensor or None but got grad of type "
                                f"{type(value).__name__}")
            if value._data.shape != self._data.shape:
                raise RuntimeError(f"attempting to assign a gradient of size '{list(value._data.shape)}' to a "
                                   f"tensor of size '{list(self._data.shape)}'. Please ensure that the gradient "
                                   "and the tensor are the same size")
        self._grad = value
        obs = _observers.get()
        if obs:
            for o in obs:
                try:
                    o.on_grad_write(self, value)
                except Exception as failure:
                    o.callback_failed("on_grad_write", failure)

    @property
    def grad_fn(self):
        if self._base is not None and self._view_version != self._vc.value:
            self._sync_view()
        return self._grad_fn

    def _sync_view(self):
        """This view's base was written in place: take its history from the base's current one."""
        from .function import _refresh_view_history

        _refresh_view_history(self)

    creator = grad_fn  # the seed's (pre-0.4) name

    @property
    def is_leaf(self):
        return self.grad_fn is None

    @property
    def _version(self):
        return self._vc.value

    version = _version

    @property
    def name(self):
        return self._name

    @name.setter
    def name(self, value):
        self._name = value

    @property
    def output_nr(self):
        return self._output_nr

    @property
    def _is_view(self):
        return self._base is not None

    def is_view(self):
        return self._base is not None

    def _accumulator(self):
        """The AccumulateGrad node of this leaf (made on first use, held weakly to avoid a cycle)."""
        ref = self._acc_ref
        node = ref() if ref is not None else None
        if node is None:
            from .function import AccumulateGrad

            node = AccumulateGrad(self)
            self._acc_ref = weakref.ref(node)
        return node

    @property
    def retains_grad(self):
        fn = self._grad_fn
        if fn is None or not fn._retain:
            return False
        ref = fn._retain.get(self._output_nr)
        return ref is not None and ref() is self

    def retain_grad(self):
        if not self.requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        fn = self._grad_fn
        if fn is None:
            return  # leaves keep their gradient anyway
        if fn._retain is None:
            fn._retain = {}
        fn._retain[self._output_nr] = weakref.ref(self)
        obs = _observers.get()
        if obs:
            for o in obs:
                try:
                    o.on_hook(self, None, "register")
                except Exception as failure:
                    o.callback_failed("on_hook", failure)

    def register_hook(self, hook):
        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        fn = self._grad_fn
        if fn is None:
            if self._hooks is None:
                self._hooks = {}
            handle = RemovableHandle(self, self._hooks, hook)
            self._hooks[handle.id] = (handle, hook)
        else:
            if fn._pre_hooks is None:
                fn._pre_hooks = {}
            registry = fn._pre_hooks.setdefault(self._output_nr, [])
            handle = RemovableHandle(self, registry, hook)
            registry.append((handle, hook))
        obs = _observers.get()
        if obs:
            for o in obs:
                try:
                    o.on_hook(self, hook, "register")
                except Exception as failure:
                    o.callback_failed("on_hook", failure)
        return handle

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        from .engine import backward

        backward(self, None if gradient is None else [gradient], retain_graph, create_graph, inputs)

    def detach(self):
        v = Variable.__new__(Variable)
        v._init(self._data)
        v._vc = self._vc
        obs = _observers.get()
        if obs:
            for o in obs:
                try:
                    o.on_detach(self, v, "detach")
                except Exception as failure:
                    o.callback_failed("on_detach", failure)
        return v

    def detach_(self):
        if self._base is not None:
            raise RuntimeError("Can't detach views in-place. Use detach() instead.")
        self._grad_fn = None
        self._requires_grad = False
        obs = _observers.get()
        if obs:
            for o in obs:
                try:
                    o.on_detach(self, self, "detach")
                except Exception as failure:
                    o.callback_failed("on_detach", failure)
        return self

    # ----- plain values ------------------------------------------------------------------------------
    def numpy(self):
        if self._requires_grad:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() "
                               "instead.")
        obs = _observers.get()
        if obs:
            for o in obs:
                try:
                    o.on_detach(self, self._data, "numpy")
                except Exception as failure:
                    o.callback_failed("on_detach", failure)
        return self._data

    def __array__(self, dtype=None, copy=None):
        if self._requires_grad:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() "
                               "instead.")
        obs = _observers.get()
        if obs:
            for o in obs:
                try:
                    o.on_detach(self, self._data, "numpy")
                except Exception as failure:
                    o.callback_failed("on_detach", failure)
        return self._data if dtype is None else self._data.astype(dtype)

    def item(self):
        if self._data.size != 1:
            raise RuntimeError(f"a Tensor with {self._data.size} elements cannot be converted to Scalar")
        value = self._data.reshape(()).item()
        obs = _observers.get()
        if obs:
            for o in obs:
                try:
                    o.on_detach(self, value, "item")
                except Exception as failure:
                    o.callback_failed("on_detach", failure)
        return value

    def tolist(self):
        value = self._data.tolist()
        obs = _observers.get()
        if obs:
            for o in obs:
                try:
                    o.on_detach(self, value, "tolist")
                except Exception as failure:
                    o.callback_failed("on_detach", failure)
        return value

    def __float__(self):
        return float(self._scalar())

    def __int__(self):
        return int(self._scalar())

    def _scalar(self):
        if self._data.size != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return self.item()

    def __index__(self):
        if self._data.dtype.kind not in "iub" or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self._data.reshape(()))

    def __bool__(self):
        if self._data.size != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return bool(self._data.reshape(()))

    def __format__(self, spec):
        if self._data.size == 1 and spec:
            return format(self.item(), spec)
        return format(repr(self), spec)

    def __repr__(self):
        return format_variable(self)

    def __len__(self):
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self._data.shape[0]))

    # ----- shape and type ----------------------------------------------------------------------------
    @property
    def shape(self):
        return Size(self._data.shape)

    @property
    def ndim(self):
        return self._data.ndim

    @property
    def dtype(self):
        return self._data.dtype

    @property
    def nbytes(self):
        return self._data.nbytes

    @property
    def device(self):
        return _CPU

    def size(self, dim=None):
        if dim is None:
            return Size(self._data.shape)
        return self._data.shape[dim]

    def dim(self):
        return self._data.ndim

    def numel(self):
        return self._data.size

    def element_size(self):
        return self._data.itemsize

    def is_floating_point(self):
        return self._data.dtype.kind == "f"

    def contiguous(self, memory_format=None):
        """``self`` when its memory is row-major already, else a row-major copy (``CloneBackward``, as PyTorch
        records it), so ``x.transpose(1, 2).contiguous().view(...)`` works as in PyTorch."""
        if self._data.flags.c_contiguous:
            return self
        return _S.Clone.apply(self, order="C")

    def is_contiguous(self, memory_format=None):
        return bool(self._data.flags.c_contiguous)

    def cpu(self, memory_format=None):
        return self

    def to(self, *args, copy=False, non_blocking=False, memory_format=None, **kwargs):
        """``to(device)``, ``to(dtype)``, ``to(device, dtype)``, ``to(other)``: the CPU is the only device, so
        only a dtype change makes a new tensor (or ``copy=True``)."""
        _, dtype, _ = _parse_to(args, kwargs)
        out = self if dtype is None else self._cast(as_dtype(dtype))
        return out.clone() if copy and out is self else out

    def type(self, dtype=None):
        if dtype is None:
            names = {"float32": "Float", "float64": "Double", "int64": "Long", "int32": "Int", "bool": "Bool"}
            return f"torch.{names.get(str(self.dtype), str(self.dtype))}Tensor"
        from ..legacy import legacy_dtype

        return self._cast(legacy_dtype(dtype) or as_dtype(dtype))

    def _cast(self, dtype):
        if dtype == self._data.dtype:
            return self
        return _P.Cast.apply(self, dtype=dtype)

    def float(self):
        return self._cast(np.dtype(np.float32))

    def double(self):
        return self._cast(np.dtype(np.float64))

    def long(self):
        return self._cast(np.dtype(np.int64))

    def int(self):
        return self._cast(np.dtype(np.int32))

    def bool(self):
        return self._cast(np.dtype(np.bool_))

    def half(self):
        raise UnsupportedError("gradviz supports float32 and float64, not float16 (Tensor.half)",
                               torch_name="Tensor.half")

    def cuda(self, device=None, non_blocking=False, memory_format=None):
        _as_device("cuda" if device is None else device)  # raises: the engine runs on the CPU only

    # ----- arithmetic: operators live here, their ops in gradviz.ops -----------------------------------
    def __add__(self, other):
        return _A.Add.apply(self, other)

    def __radd__(self, other):
        return _A.Add.apply(other, self)

    def __sub__(self, other):
        return _A.Sub.apply(self, other)

    def __rsub__(self, other):
        return _A.Sub.apply(other, self)

    def __mul__(self, other):
        return _A.Mul.apply(self, other)

    def __rmul__(self, other):
        return _A.Mul.apply(other, self)

    def __truediv__(self, other):
        return _A.Div.apply(self, other)

    def __rtruediv__(self, other):
        return _A.Div.apply(other, self)

    def __pow__(self, exponent):
        return _A.Pow.apply(self, exponent)

    def __rpow__(self, base):
        return _A.Pow.apply(base, self)

    def __matmul__(self, other):
        return _A.MatMul.apply(self, other)

    def __rmatmul__(self, other):
        return _A.MatMul.apply(other, self)

    def __neg__(self):
        return _A.Neg.apply(self)

    def __pos__(self):
        return self

    def __abs__(self):
        return _P.Abs.apply(self)

    def __iadd__(self, other):
        return self.add_(other)

    def __isub__(self, other):
        return self.sub_(other)

    def __imul__(self, other):
        return self.mul_(other)

    def __itruediv__(self, other):
        return self.div_(other)

    def __ipow__(self, other):
        return self.pow_(other)

    def __lt__(self, other):
        return _I.compare(self, other, "lt")

    def __le__(self, other):
        return _I.compare(self, other, "le")

    def __gt__(self, other):
        return _I.compare(self, other, "gt")

    def __ge__(self, other):
        return _I.compare(self, other, "ge")

    def __eq__(self, other):
        return _I.compare(self, other, "eq")

    def __ne__(self, other):
        return _I.compare(self, other, "ne")

    def __invert__(self):
        return _L.BitwiseNot.apply(self)

    def __and__(self, other):
        return _L.Bitwise.apply(self, other, op="and")

    def __or__(self, other):
        return _L.Bitwise.apply(self, other, op="or")

    def lt(self, other):
        return self < other

    def le(self, other):
        return self <= other

    def gt(self, other):
        return self > other

    def ge(self, other):
        return self >= other

    def eq(self, other):
        return self == other

    def ne(self, other):
        return self != other

    def equal(self, other):
        return bool(np.array_equal(self._data, other._data))

    def add(self, other, alpha=1):
        return self + (other if alpha == 1 else other * alpha)

    def sub(self, other, alpha=1):
        return self - (other if alpha == 1 else other * alpha)

    def mul(self, other):
        return self * other

    def div(self, other, rounding_mode=None):
        if rounding_mode is None:
            return self / other
        return _div_rounded(self, other, rounding_mode)

    def pow(self, exponent):
        return _A.Pow.apply(self, exponent)

    def matmul(self, other):
        return _A.MatMul.apply(self, other)

    def mm(self, other):
        if self._data.ndim != 2 or _ndim(other) != 2:
            raise RuntimeError("self must be a matrix")
        return _A.MatMul.apply(self, other)

    # ----- pointwise ---------------------------------------------------------------------------------
    def clamp(self, min=None, max=None):
        if isinstance(min, Variable) or isinstance(max, Variable):
            return _B.ClampTensor.apply(self, min, max)
        return _P.Clamp.apply(self, min=min, max=max)

    clip = clamp

    def norm(self, p="fro", dim=None, keepdim=False, dtype=None):
        return _R.norm(self, p, dim, keepdim, _as_dtype(dtype))

    # ----- reductions --------------------------------------------------------------------------------
    def sum(self, dim=None, keepdim=False, dtype=None):
        out = _R.Sum.apply(self, dim=dim, keepdim=keepdim)
        return out if dtype is None else out.to(dtype)

    def mean(self, dim=None, keepdim=False):
        return _R.Mean.apply(self, dim=dim, keepdim=keepdim)

    def var(self, dim=None, unbiased=True, keepdim=False, correction=None):
        _R.check_var_dtype(self)
        return _R.Var.apply(self, dim=dim, correction=(1 if unbiased else 0) if correction is None
                            else correction, keepdim=keepdim)

    def std(self, dim=None, unbiased=True, keepdim=False, correction=None):
        _R.check_var_dtype(self)
        return _R.Std.apply(self, dim=dim, correction=(1 if unbiased else 0) if correction is None
                            else correction, keepdim=keepdim)

    def max(self, dim=None, keepdim=False):
        if isinstance(dim, Variable):
            return _A.Maximum.apply(self, dim)
        return _R.max_min(self, dim, keepdim, "max")

    def min(self, dim=None, keepdim=False):
        if isinstance(dim, Variable):
            return _A.Minimum.apply(self, dim)
        return _R.max_min(self, dim, keepdim, "min")

    def argmax(self, dim=None, keepdim=False):
        return _R.arg_max_min(self, dim, keepdim, "max")

    def argmin(self, dim=None, keepdim=False):
        return _R.arg_max_min(self, dim, keepdim, "min")

    def softmax(self, dim):
        return _R.Softmax.apply(self, dim=dim)

    def log_softmax(self, dim):
        return _R.LogSoftmax.apply(self, dim=dim)

    # ----- shape -------------------------------------------------------------------------------------
    def view(self, *shape):
        return _S.view(self, shape)

    def view_as(self, other):
        return _S.view(self, (other.shape,))

    def reshape(self, *shape):
        return _S.reshape(self, shape)

    def reshape_as(self, other):
        return _S.reshape(self, (other.shape,))

    def flatten(self, start_dim=0, end_dim=-1):
        return _S.flatten(self, start_dim, end_dim)

    def transpose(self, dim0, dim1):
        return _S.Transpose.apply(self, dim0=dim0, dim1=dim1)

    def t(self):
        if self._data.ndim > 2:
            raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {self._data.ndim}D")
        return self if self._data.ndim < 2 else _S.Transpose.apply(self, dim0=0, dim1=1)

    @property
    def T(self):
        return _S.Permute.apply(self, dims=tuple(range(self._data.ndim - 1, -1, -1)))

    def permute(self, *dims):
        dims = tuple(dims[0]) if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims
        return _S.Permute.apply(self, dims=dims)

    def squeeze(self, dim=None):
        return _S.Squeeze.apply(self, dim=dim)

    def unsqueeze(self, dim):
        return _S.Unsqueeze.apply(self, dim=dim)

    def expand(self, *sizes):
        return _S.expand(self, sizes)

    def expand_as(self, other):
        return _S.expand(self, (other.shape,))

    def clone(self):
        return _S.Clone.apply(self)

    def __getitem__(self, index):
        return _I.getitem(self, index)

    def __setitem__(self, index, value):
        _I.setitem(self, index, value)

    # ----- in-place ops: each bumps the version counter ------------------------------------------------
    def add_(self, other, alpha=1):
        return apply_inplace(_A.Add, self, other if alpha == 1 else other * alpha)

    def sub_(self, other, alpha=1):
        return apply_inplace(_A.Sub, self, other if alpha == 1 else other * alpha)

    def mul_(self, other):
        return apply_inplace(_A.Mul, self, other)

    def div_(self, other, rounding_mode=None):
        if rounding_mode is None:
            return apply_inplace(_A.Div, self, other)
        _check_rounding_mode(rounding_mode)
        return apply_inplace(_B.DivMode, self, other, rounding_mode=rounding_mode)

    def pow_(self, exponent):
        return apply_inplace(_A.Pow, self, exponent)

    def clamp_(self, min=None, max=None):
        if isinstance(min, Variable) or isinstance(max, Variable):
            return apply_inplace(_B.ClampTensor, self, min, max)
        return apply_inplace(_P.Clamp, self, min=min, max=max)

    def zero_(self):
        return apply_inplace(_I.Fill, self, value=0)

    def fill_(self, value):
        return apply_inplace(_I.Fill, self, value=value)

    def copy_(self, src):
        return apply_inplace(_I.Copy, self, src)

    def normal_(self, mean=0.0, std=1.0):
        return _fill_random(self, lambda rng, shape: rng.normal(mean, std, shape))

    def uniform_(self, a=0.0, b=1.0):
        return _fill_random(self, lambda rng, shape: rng.uniform(a, b, shape))

    # ----- the pointwise math family, logical ops, masked_fill (issue 8, opsa) ------------------------------
    # Ops live in gradviz.ops.math_special (one tensor), binary_math (two or three) and logical.
    def square(self):
        return _A.Pow.apply(self, 2)

    def square_(self):
        return apply_inplace(_A.Pow, self, 2)

    def round(self, decimals=0):
        return _M.Round.apply(self, decimals=decimals)

    def round_(self, decimals=0):
        return apply_inplace(_M.Round, self, decimals=decimals)

    def logit(self, eps=None):
        return _M.Logit.apply(self, eps=eps)

    def logit_(self, eps=None):
        return apply_inplace(_M.Logit, self, eps=eps)

    def atan2(self, other):
        return _B.Atan2.apply(self, other)

    def atan2_(self, other):
        return apply_inplace(_B.Atan2, self, other)

    arctan2, arctan2_ = atan2, atan2_

    def hypot(self, other):
        return _B.Hypot.apply(self, other)

    def hypot_(self, other):
        return apply_inplace(_B.Hypot, self, other)

    def fmod(self, other):
        return _B.Fmod.apply(self, other)

    def fmod_(self, other):
        return apply_inplace(_B.Fmod, self, other)

    def remainder(self, other):
        return _B.Remainder.apply(self, other)

    def remainder_(self, other):
        return apply_inplace(_B.Remainder, self, other)

    def __mod__(self, other):
        return _B.Remainder.apply(self, other)

    def __rmod__(self, other):
        return _B.Remainder.apply(other, self)

    def __imod__(self, other):
        return self.remainder_(other)

    def floor_divide(self, other):
        return _B.FloorDivide.apply(self, other)

    def floor_divide_(self, other):
        return apply_inplace(_B.FloorDivide, self, other)

    def __floordiv__(self, other):
        return _B.FloorDivide.apply(self, other)

    def __rfloordiv__(self, other):
        return _B.FloorDivide.apply(other, self)

    def __ifloordiv__(self, other):
        return self.floor_divide_(other)

    def true_divide(self, other):
        return _A.Div.apply(self, other)

    def true_divide_(self, other):
        return apply_inplace(_A.Div, self, other)

    divide, divide_ = div, div_

    def lerp(self, end, weight):
        return _B.Lerp.apply(self, end, weight)

    def lerp_(self, end, weight):
        return apply_inplace(_B.Lerp, self, end, weight)

    def maximum(self, other):
        _require_tensor("maximum", other)
        return _A.Maximum.apply(self, other)

    def minimum(self, other):
        _require_tensor("minimum", other)
        return _A.Minimum.apply(self, other)

    def clamp_min(self, min):
        return _B.ClampMin.apply(self, min, None)

    def clamp_min_(self, min):
        return apply_inplace(_B.ClampMin, self, min, None)

    def clamp_max(self, max):
        return _B.ClampMax.apply(self, None, max)

    def clamp_max_(self, max):
        return apply_inplace(_B.ClampMax, self, None, max)

    def logical_and(self, other):
        return _L.Logical.apply(self, other, op="and")

    def logical_or(self, other):
        return _L.Logical.apply(self, other, op="or")

    def logical_xor(self, other):
        return _L.Logical.apply(self, other, op="xor")

    def logical_and_(self, other):
        return apply_inplace(_L.Logical, self, other, op="and")

    def logical_or_(self, other):
        return apply_inplace(_L.Logical, self, other, op="or")

    def logical_xor_(self, other):
        return apply_inplace(_L.Logical, self, other, op="xor")

    def bitwise_and(self, other):
        return _L.Bitwise.apply(self, other, op="and")

    def bitwise_or(self, other):
        return _L.Bitwise.apply(self, other, op="or")

    def bitwise_xor(self, other):
        return _L.Bitwise.apply(self, other, op="xor")

    def bitwise_and_(self, other):
        return apply_inplace(_L.Bitwise, self, other, op="and")

    def bitwise_or_(self, other):
        return apply_inplace(_L.Bitwise, self, other, op="or")

    def bitwise_xor_(self, other):
        return apply_inplace(_L.Bitwise, self, other, op="xor")

    def __xor__(self, other):
        return _L.Bitwise.apply(self, other, op="xor")

    def __rand__(self, other):
        return _L.Bitwise.apply(other, self, op="and")

    def __ror__(self, other):
        return _L.Bitwise.apply(other, self, op="or")

    def __rxor__(self, other):
        return _L.Bitwise.apply(other, self, op="xor")

    def __iand__(self, other):
        return self.bitwise_and_(other)

    def __ior__(self, other):
        return self.bitwise_or_(other)

    def __ixor__(self, other):
        return self.bitwise_xor_(other)

    def isnan(self):
        return _L.Test.apply(self, test="isnan")

    def isinf(self):
        return _L.Test.apply(self, test="isinf")

    def isfinite(self):
        return _L.Test.apply(self, test="isfinite")

    def masked_fill(self, mask, value):
        return _L.MaskedFill.apply(self, mask, value)

    def masked_fill_(self, mask, value):
        return apply_inplace(_L.MaskedFill, self, mask, value)

    def where(self, condition, other):
        return _I.where(condition, self, other)

    greater, greater_equal, less, less_equal, not_equal = gt, ge, lt, le, ne
    # ----- end of the opsa block ----------------------------------------------------------------------------

    # ----- opsb: views, rearrangements, gather/scatter, sorting, reductions, products, sampling -----------------
    def narrow(self, dim, start, length):
        return _S.narrow(self, dim, start, length)

    def split(self, split_size, dim=0):
        return _S.split(self, split_size, dim)

    def chunk(self, chunks, dim=0):
        return _S.chunk(self, chunks, dim)

    def unbind(self, dim=0):
        return _S.unbind(self, dim)

    def movedim(self, source, destination):
        return _S.movedim(self, source, destination)

    moveaxis = movedim

    def unflatten(self, dim, sizes):
        return _S.unflatten(self, dim, sizes)

    def diagonal(self, offset=0, dim1=0, dim2=1):
        return _S.diagonal(self, offset, dim1, dim2)

    def repeat(self, *sizes):
        return _S.repeat(self, sizes)

    def tile(self, *dims):
        return _S.tile(self, dims)

    def repeat_interleave(self, repeats, dim=None, output_size=None):
        return _S.repeat_interleave(self, repeats, dim)

    def flip(self, *dims):
        return _S.flip(self, dims[0] if len(dims) == 1 else dims)

    def roll(self, shifts, dims=None):
        return _S.roll(self, shifts, dims)

    def gather(self, dim, index):
        return _G.gather(self, dim, index)

    def scatter(self, dim, index, src=None, value=None, reduce=None):
        return _G.scatter(self, dim, index, src, value, reduce)

    def scatter_(self, dim, index, src=None, value=None, reduce=None):
        src = value if src is None else src
        return apply_inplace(_G.Scatter, self, index, src, dim=_G.check_scatter(self, dim, index, src, "scatter"))

    def scatter_add(self, dim, index, src):
        return _G.scatter_add(self, dim, index, src)

    def scatter_add_(self, dim, index, src):
        d = _G.check_scatter(self, dim, index, src, "scatter")
        return apply_inplace(_G.ScatterAdd, self, index, src, dim=d)

    def index_select(self, dim, index):
        return _G.index_select(self, dim, index)

    def index_add(self, dim, index, source, alpha=1):
        return _G.index_add(self, dim, index, source, alpha)

    def index_add_(self, dim, index, source, alpha=1):
        d = _G.check_index_add(self, dim, index, source)
        return apply_inplace(_G.IndexAdd, self, index, source, dim=d, alpha=alpha)

    def take_along_dim(self, indices, dim=None):
        return _G.take_along_dim(self, indices, dim)

    def sort(self, dim=-1, descending=False, stable=False):
        return _O.sort(self, dim, descending, stable)

    def argsort(self, dim=-1, descending=False, stable=False):
        return _O.argsort(self, dim, descending, stable)

    def topk(self, k, dim=-1, largest=True, sorted=True):
        return _O.topk(self, k, dim, largest, sorted)

    def cumsum(self, dim, dtype=None):
        return _R.cumsum(self, dim, _as_dtype(dtype))

    def cumsum_(self, dim, dtype=None):
        return apply_inplace(_R.Cumsum, self, dim=_S._dim(dim, self._data.ndim), dtype=_as_dtype(dtype))

    def cumprod(self, dim, dtype=None):
        return _R.cumprod(self, dim, _as_dtype(dtype))

    def cumprod_(self, dim, dtype=None):
        return apply_inplace(_R.Cumprod, self, dim=_S._dim(dim, self._data.ndim), dtype=_as_dtype(dtype))

    def prod(self, dim=None, keepdim=False, dtype=None):
        return _R.prod(self, dim, keepdim, _as_dtype(dtype))

    def logsumexp(self, dim, keepdim=False):
        return _R.logsumexp(self, dim, keepdim)

    def amax(self, dim=(), keepdim=False):
        return _R.amax(self, dim, keepdim, "max")

    def amin(self, dim=(), keepdim=False):
        return _R.amax(self, dim, keepdim, "min")

    def all(self, dim=None, keepdim=False):
        return _R.all_any(self, dim, keepdim, "all")

    def any(self, dim=None, keepdim=False):
        return _R.all_any(self, dim, keepdim, "any")

    def bmm(self, other):
        return _LA.bmm(self, other)

    def addmm(self, mat1, mat2, beta=1, alpha=1):
        return _LA.addmm(self, mat1, mat2, beta, alpha)

    def addmm_(self, mat1, mat2, beta=1, alpha=1):
        _LA.check_addmm(self, mat1, mat2)
        return apply_inplace(_LA.Addmm, self, mat1, mat2, beta=beta, alpha=alpha)

    def baddbmm(self, batch1, batch2, beta=1, alpha=1):
        return _LA.baddbmm(self, batch1, batch2, beta, alpha)

    def baddbmm_(self, batch1, batch2, beta=1, alpha=1):
        _LA.check_baddbmm(self, batch1, batch2)
        return apply_inplace(_LA.Baddbmm, self, batch1, batch2, beta=beta, alpha=alpha)

    def dot(self, other):
        return _LA.dot(self, other)

    def outer(self, other):
        return _LA.outer(self, other)

    def tril(self, diagonal=0):
        return _LA.tril(self, diagonal)

    def triu(self, diagonal=0):
        return _LA.tril(self, diagonal, upper=True)

    def tril_(self, diagonal=0):
        _LA.check_tril(self, upper=False)
        return apply_inplace(_LA.Tril, self, diagonal=int(diagonal), upper=False)

    def triu_(self, diagonal=0):
        _LA.check_tril(self, upper=True)
        return apply_inplace(_LA.Triu, self, diagonal=int(diagonal), upper=True)

    def diag(self, diagonal=0):
        return _LA.diag(self, diagonal)

    def trace(self):
        return _LA.trace(self)

    def bernoulli(self, p=None, generator=None):
        from ..ops import random

        return random.bernoulli(self, p, generator)

    def bernoulli_(self, p=0.5, generator=None):
        from ..ops import random

        return random.bernoulli_fill(self, p, generator)

    def multinomial(self, num_samples, replacement=False, generator=None):
        from ..ops import random

        return random.multinomial(self, num_samples, replacement, generator)

    # ----- devices, casts and factory methods (the CPU is the only device) -----------------------------------
    @property
    def is_cuda(self):
        return False

    @property
    def is_cpu(self):
        return True

    def get_device(self):
        return -1  # PyTorch's answer for a CPU tensor

    def type_as(self, other):
        return self._cast(other.dtype)

    def new_tensor(self, data, dtype=None, device=None, requires_grad=False):
        from ..factories import tensor

        return tensor(data, dtype=dtype or self.dtype, device=device, requires_grad=requires_grad)

    def new_zeros(self, *size, dtype=None, device=None, requires_grad=False):
        from ..factories import zeros

        return zeros(*size, dtype=dtype or self.dtype, device=device, requires_grad=requires_grad)

    def new_ones(self, *size, dtype=None, device=None, requires_grad=False):
        from ..factories import ones

        return ones(*size, dtype=dtype or self.dtype, device=device, requires_grad=requires_grad)

    def new_empty(self, *size, dtype=None, device=None, requires_grad=False):
        from ..factories import empty

        return empty(*size, dtype=dtype or self.dtype, device=device, requires_grad=requires_grad)

    def new_full(self, size, fill_value, dtype=None, device=None, requires_grad=False):
        from ..factories import full

        return full(size, fill_value, dtype=dtype or self.dtype, device=device, requires_grad=requires_grad)

    # ----- breadth2: nonzero, unique, isclose (gradviz.ops.searching) ----------------------------------------
    def nonzero(self, *, as_tuple=False):
        from ..ops.searching import nonzero

        return nonzero(self, as_tuple=as_tuple)

    def unique(self, sorted=True, return_inverse=False, return_counts=False, dim=None):
        from ..ops.searching import unique

        return unique(self, sorted=sorted, return_inverse=return_inverse, return_counts=return_counts, dim=dim)

    def isclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False):
        from ..ops.searching import isclose

        return isclose(self, other, rtol=rtol, atol=atol, equal_nan=equal_nan)

    # ----- end of the breadth2 block --------------------------------------------------------------------------

    # ----- a name the engine lacks: one line naming it, with the closest supported name ---------------------
    def __getattr__(self, name):
        # only reached when normal lookup failed; private and dunder probes (numpy, copy) stay cheap
        if name.startswith("_"):
            raise AttributeError(f"'Tensor' object has no attribute '{name}'")
        raise UnsupportedTensorAttribute(f"Tensor.{name}", lambda: _closest_method(type(self), name))


def _closest_method(cls, name):
    import difflib

    public = [n for n in dir(cls) if not n.startswith("_")]
    match = difflib.get_close_matches(name, public, n=1, cutoff=0.7)
    return f"Tensor.{match[0]}" if match else None


def _is_size(data, sizes):
    """``Tensor(5, 3)`` / ``Tensor(torch.Size([5, 3]))``: sizes, not data (ints, bools excluded)."""
    if isinstance(data, Size):
        return not sizes
    return _is_int(data) and all(_is_int(s) for s in sizes)


def _is_int(value):
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _legacy_size(data, sizes):
    return tuple(int(d) for d in data) if isinstance(data, Size) else (int(data),) + tuple(int(s) for s in sizes)


def _old_positional_flags(sizes, volatile):
    """``Variable(data, True)``, ``Variable(data, False, True)``: the seed-era constructor took requires_grad and
    volatile positionally."""
    if len(sizes) <= 2 and all(isinstance(s, bool) for s in sizes):
        return sizes[0], sizes[1] if len(sizes) == 2 else volatile
    raise TypeError(f"new(): data must be a sequence or a size, not {type(sizes[0]).__name__} after the data")


def _fill_random(var, draw):
    from ..factories import _rng

    return apply_inplace(_I.Fill, var, value=draw(_rng(), var._data.shape).astype(var._data.dtype))


def _require_tensor(op, other):
    if not isinstance(other, Variable):
        raise TypeError(f"{op}(): argument 'other' (position 2) must be Tensor, not {type(other).__name__}")


def _div_rounded(a, b, rounding_mode):
    _check_rounding_mode(rounding_mode)
    return _B.DivMode.apply(a, b, rounding_mode=rounding_mode)


def _check_rounding_mode(rounding_mode):
    if rounding_mode not in ("trunc", "floor"):
        raise RuntimeError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
                           f"'{rounding_mode}'")


def _ndim(x):
    return x._data.ndim if isinstance(x, Variable) else np.ndim(x)


def _warn_volatile():
    global _warned_volatile
    if not _warned_volatile:
        _warned_volatile = True
        warnings.warn("volatile is deprecated: use `with gradviz.no_grad():` instead. gradviz still honours it: "
                      "volatility spreads to every output, which then has no grad_fn.",
                      DeprecationWarning, stacklevel=3)


class Size(tuple):
    """``torch.Size``: a tuple of ints that prints as ``torch.Size([2, 3])``."""

    def __repr__(self):
        return f"torch.Size([{', '.join(str(d) for d in self)}])"

    def numel(self):
        n = 1
        for d in self:
            n *= d
        return n


def format_variable(var):
    """PyTorch-style text: ``tensor([[ 0.1000, -0.2000]], grad_fn=<MulBackward>)``."""
    data = var._data
    prefix = "tensor("
    if data.dtype.kind == "f":
        finite = data[np.isfinite(data)]
        # PyTorch prints whole numbers as `1.` and everything else with four decimals.
        mode = "maxprec" if finite.size and np.all(finite == np.round(finite)) else "fixed"
        body = np.array2string(data, precision=4, floatmode=mode, separator=", ", prefix=prefix,
                               max_line_width=80, threshold=1000)
    else:
        body = np.array2string(data, separator=", ", prefix=prefix, threshold=1000)
    extras = []
    if data.dtype not in (np.float32, np.int64, np.bool_):
        extras.append(f"dtype=torch.{data.dtype}")
    if var._grad_fn is not None:
        extras.append(f"grad_fn=<{var._grad_fn.name()}>")
    elif var._requires_grad:
        extras.append("requires_grad=True")
    if data.size == 0:
        body = "[]"
    return prefix + body + "".join(", " + e for e in extras) + ")"


# Imported last: the op modules build on Function, which needs Variable defined above.
from ..device import CPU as _CPU  # noqa: E402
from ..device import as_device as _as_device  # noqa: E402
from ..device import parse_to as _parse_to  # noqa: E402
from ..dtypes import as_dtype  # noqa: E402
from ..ops import arithmetic as _A  # noqa: E402
from ..ops import binary_math as _B  # noqa: E402
from ..ops import indexing as _I  # noqa: E402
from ..ops import linalg as _LA  # noqa: E402
from ..ops import logical as _L  # noqa: E402
from ..ops import math_special as _M  # noqa: E402
from ..ops import pointwise as _P  # noqa: E402
from ..ops import reduction as _R  # noqa: E402
from ..ops import scatter as _G  # noqa: E402
from ..ops import shape as _S  # noqa: E402
from ..ops import sorting as _O  # noqa: E402
from .inplace import apply_inplace  # noqa: E402

# The one-tensor elementwise methods, each with its in-place twin (`exp` and `exp_`): one row per method, so the
# ~70 methods that differ only in their op are not written out by hand. Operators (`__neg__`, `__abs__`, …) and
# methods with arguments stay in the class body.
ELEMENTWISE_METHODS = {
    "neg": _A.Neg, "abs": _P.Abs, "relu": _P.Relu, "sigmoid": _P.Sigmoid, "tanh": _P.Tanh,
    "exp": _P.Exp, "exp2": _M.Exp2, "expm1": _M.Expm1,
    "log": _P.Log, "log2": _M.Log2, "log10": _M.Log10, "log1p": _M.Log1p,
    "sqrt": _P.Sqrt, "rsqrt": _M.Rsqrt, "reciprocal": _M.Reciprocal, "sign": _M.Sign,
    "sin": _P.Sin, "cos": _P.Cos, "tan": _M.Tan, "asin": _M.Asin, "acos": _M.Acos, "atan": _M.Atan,
    "sinh": _M.Sinh, "cosh": _M.Cosh, "asinh": _M.Asinh, "acosh": _M.Acosh, "atanh": _M.Atanh,
    "floor": _M.Floor, "ceil": _M.Ceil, "trunc": _M.Trunc, "frac": _M.Frac,
    "erf": _M.Erf, "erfc": _M.Erfc, "erfinv": _M.Erfinv,
    "logical_not": _L.LogicalNot, "bitwise_not": _L.BitwiseNot,
}
# PyTorch's other names for some of them (and their in-place twins).
ELEMENTWISE_ALIASES = {
    "arcsin": "asin", "arccos": "acos", "arctan": "atan", "arcsinh": "asinh", "arccosh": "acosh",
    "arctanh": "atanh", "absolute": "abs", "negative": "neg", "fix": "trunc",
}


def _elementwise_pair(name, op):
    def out_of_place(self):
        return op.apply(self)

    def in_place(self):
        return apply_inplace(op, self)

    for method, method_name in ((out_of_place, name), (in_place, name + "_")):
        method.__name__ = method_name
        method.__qualname__ = f"Variable.{method_name}"
        method.__doc__ = f"``torch.Tensor.{method_name}`` ({op.__name__}{', in place' if method is in_place else ''})."
    return out_of_place, in_place


for _name, _op in ELEMENTWISE_METHODS.items():
    _out, _in = _elementwise_pair(_name, _op)
    setattr(Variable, _name, _out)
    setattr(Variable, _name + "_", _in)
for _alias, _name in ELEMENTWISE_ALIASES.items():
    setattr(Variable, _alias, getattr(Variable, _name))
    setattr(Variable, _alias + "_", getattr(Variable, _name + "_"))
del _name, _op, _out, _in, _alias
