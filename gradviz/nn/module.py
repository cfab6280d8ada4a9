"""``Module``: the base class of layers and models, with PyTorch's registration, traversal and state API.

Attributes that are Parameters, sub-Modules or registered buffers live in ``_parameters``, ``_modules`` and
``_buffers`` (ordered dicts) and are found through ``__getattr__``, as in PyTorch, so traversal order is
assignment order and ``state_dict`` keys are dotted attribute paths.
"""

import itertools
from collections import OrderedDict, namedtuple

import numpy as np

from ..autograd import grad_mode, observer
from ..autograd.variable import Variable
from ..dtypes import as_dtype
from ..errors import UnsupportedError
from .parameter import Parameter

_observers = observer._observers
_hook_ids = itertools.count()


class RemovableHandle:
    """What ``register_forward_hook`` and friends return; ``remove()`` unregisters the hook."""

    def __init__(self, registry):
        self.id = next(_hook_ids)
        self._registry = registry

    def remove(self):
        self._registry.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
        return False


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


def torch_typename(value):
    """How PyTorch names a value's type in messages: ``torch.FloatTensor``, ``int``…"""
    if isinstance(value, Variable):
        names = {"float32": "Float", "float64": "Double", "int64": "Long", "bool": "Bool"}
        return f"torch.{names.get(str(value.dtype), str(value.dtype))}Tensor"
    return type(value).__name__


class Module:
    """Base class of every layer and model; subclasses define ``forward``."""

    training: bool

    def __init__(self):
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = OrderedDict()
        d["_buffers"] = OrderedDict()
        d["_non_persistent"] = set()
        d["_modules"] = OrderedDict()
        d["_forward_hooks"] = OrderedDict()
        d["_forward_pre_hooks"] = OrderedDict()

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    # ----- calling ----------------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        obs = _observers.get()
        if not obs and not self._forward_hooks and not self._forward_pre_hooks:
            return self.forward(*args, **kwargs)
        return self._observed_call(obs, args, kwargs)

    def _observed_call(self, obs, args, kwargs):
        """The call with hooks and observers: enter, pre-hooks, forward, hooks, exit (even on error)."""
        for o in obs:
            try:
                o.on_module_call(self, "enter", args)  # positional: (inputs, output) cost no keyword matching
            except Exception as failure:
                o.callback_failed("on_module_call", failure)
        out = None
        try:
            if self._forward_pre_hooks:  # (no list made when there are none: the observed path, every call)
                for hook in list(self._forward_pre_hooks.values()):
                    result = hook(self, args)
                    if result is not None:
                        args = result if isinstance(result, tuple) else (result,)
            out = self.forward(*args, **kwargs)
            if self._forward_hooks:
                for hook in list(self._forward_hooks.values()):
                    result = hook(self, args, out)
                    if result is not None:
                        out = result
            return out
        finally:
            for o in obs:
                try:
                    o.on_module_call(self, "exit", None, out)
                except Exception as failure:
                    o.callback_failed("on_module_call", failure)

    def register_forward_hook(self, hook):
        """``hook(module, args, output)`` runs after forward; a non-None result replaces the output."""
        handle = RemovableHandle(self._forward_hooks)
        self._forward_hooks[handle.id] = hook
        return handle

    def register_forward_pre_hook(self, hook):
        """``hook(module, args)`` runs before forward; a non-None result replaces the positional args."""
        handle = RemovableHandle(self._forward_pre_hooks)
        self._forward_pre_hooks[handle.id] = hook
        return handle

    def register_full_backward_hook(self, hook):
        raise UnsupportedError("gradviz has no module backward hooks; register a hook on the output tensor "
                               "instead (output.register_hook(fn))")

    register_backward_hook = register_full_backward_hook

    # ----- registration -----------------------------------------------------------------------------
    def __getattr__(self, name):
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            items = d.get(store)
            if items is not None and name in items:
                return items[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name, value):
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._forget(name)
            params[name] = value
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{torch_typename(value)}' as parameter '{name}' "
                                "(torch.nn.Parameter or None expected)")
            params[name] = None
        elif isinstance(value, Module):
            if d.get("_modules") is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._forget(name)
            d["_modules"][name] = value
        elif d.get("_modules") is not None and name in d["_modules"]:
            if value is not None:
                raise TypeError(f"cannot assign '{torch_typename(value)}' as child module '{name}' "
                                "(torch.nn.Module or None expected)")
            d["_modules"][name] = None
        elif d.get("_buffers") is not None and name in d["_buffers"]:
            if value is not None and not isinstance(value, Variable):
                raise TypeError(f"cannot assign '{torch_typename(value)}' as buffer '{name}' "
                                "(torch.Tensor or None expected)")
            d["_buffers"][name] = value
        else:
            object.__setattr__(self, name, value)

    def __delattr__(self, name):
        for store in ("_parameters", "_buffers", "_modules"):
            items = self.__dict__[store]
            if name in items:
                del items[name]
                self._non_persistent.discard(name)
                return
        object.__delattr__(self, name)

    def _forget(self, name):
        """Drop ``name`` from every store before it is registered in another one."""
        self.__dict__.pop(name, None)
        for store in ("_parameters", "_buffers", "_modules"):
            self.__dict__[store].pop(name, None)
        self._non_persistent.discard(name)

    def _check_name(self, name, kind):
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string. Got {type(name).__name__}")
        if "." in name:
            raise KeyError(f'{kind} name can\'t contain "."')
        if name == "":
            raise KeyError(f'{kind} name can\'t be empty string ""')

    def register_parameter(self, name, param):
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        self._check_name(name, "parameter")
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{torch_typename(param)}' object to parameter '{name}' "
                            "(torch.nn.Parameter or None required)")
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        self._check_name(name, "buffer")
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Variable):
            raise TypeError(f"cannot assign '{torch_typename(tensor)}' object to buffer '{name}' "
                            "(torch Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent.discard(name)
        else:
            self._non_persistent.add(name)

    def add_module(self, name, module):
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{torch_typename(module)} is not a Module subclass")
        self._check_name(name, "module")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        self._modules[name] = module

    register_module = add_module

    def get_submodule(self, target):
        module = self
        for part in target.split(".") if target else ():
            if part not in module._modules:
                raise AttributeError(f"{module._get_name()} has no attribute `{part}`")
            module = module._modules[part]
        return module

    def get_parameter(self, target):
        path, _, name = target.rpartition(".")
        module = self.get_submodule(path)
        if name not in module._parameters:
            raise AttributeError(f"{module._get_name()} has no parameter `{name}`")
        return module._parameters[name]

    # ----- traversal --------------------------------------------------------------------------------
    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """Every module in the tree, depth first, each once (by identity) unless remove_duplicate=False."""
        memo = set() if memo is None else memo
        stack = [(prefix, self)]
        while stack:
            name, module = stack.pop()
            if remove_duplicate:
                if module in memo:
                    continue
                memo.add(module)
            yield name, module
            children = [(f"{name}.{key}" if name else key, child)
                        for key, child in module._modules.items() if child is not None]
            stack.extend(reversed(children))

    def modules(self):
        for _, module in self.named_modules():
            yield module

    def named_children(self):
        seen = set()
        for name, module in self._modules.items():
            if module is not None and module not in seen:
                seen.add(module)
                yield name, module

    def children(self):
        for _, module in self.named_children():
            yield module

    def _named_members(self, store, prefix, recurse, remove_duplicate):
        seen = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse \
            else [(prefix, self)]
        for module_prefix, module in modules:
            for name, value in getattr(module, store).items():
                if value is None or (remove_duplicate and value in seen):
                    continue
                if remove_duplicate:
                    seen.add(value)
                yield (f"{module_prefix}.{name}" if module_prefix else name), value

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        for _, param in self.named_parameters(recurse=recurse):
            yield param

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, buf in self.named_buffers(recurse=recurse):
            yield buf

    # ----- modes and bulk changes -------------------------------------------------------------------
    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        for module in self.modules():
            module.__dict__["training"] = mode
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        obs = _observers.get()
        if obs:
            with observer.quiet(self):  # gradviz's own clearing, not the user's .grad writes
                for p in self.parameters():
                    _clear_grad(p, set_to_none)
        else:
            for p in self.parameters():
                _clear_grad(p, set_to_none)
        for o in obs:
            try:
                o.on_optimizer(self, "zero_grad")
            except Exception as failure:
                o.callback_failed("on_optimizer", failure)

    def apply(self, fn):
        """Call ``fn`` on every child (recursively), then on this module; returns self."""
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    def to(self, *args, **kwargs):
        """``to(dtype)`` converts the floating-point parameters and buffers; devices other than the CPU are
        refused. The Parameter objects stay the same (an optimizer built before keeps working)."""
        from ..device import parse_to

        _, dtype, _ = parse_to(args, kwargs)  # a device other than the CPU raises here
        if dtype is None:
            return self
        dtype = as_dtype(dtype)
        if dtype.kind != "f":
            raise TypeError(f"nn.Module.to only accepts floating point dtypes, but got desired dtype={dtype}")
        return self._cast_floats(dtype)

    def float(self):
        return self._cast_floats(np.dtype(np.float32))

    def double(self):
        return self._cast_floats(np.dtype(np.float64))

    def half(self):
        raise UnsupportedError("gradviz supports float32 and float64, not float16 (Module.half)",
                               torch_name="torch.nn.Module.half")

    def cpu(self):
        return self

    def cuda(self, device=None):
        from ..device import as_device

        as_device("cuda" if device is None else device)  # raises: the engine runs on the CPU only

    def _cast_floats(self, dtype):
        for t in itertools.chain(self.parameters(), self.buffers()):
            if t._data.dtype.kind == "f" and t._data.dtype != dtype:
                t._data = t._data.astype(dtype)
                if t._grad is not None:
                    t._grad._data = t._grad._data.astype(dtype)
        return self

    # ----- state ------------------------------------------------------------------------------------
    def state_dict(self, destination=None, prefix="", keep_vars=False):
        """Parameters and persistent buffers by dotted name; values share memory with the module's."""
        out = OrderedDict() if destination is None else destination
        for name, value in self._state_items(prefix):
            out[name] = value if keep_vars else _detached(value)
        return out

    def _state_items(self, prefix=""):
        """Like PyTorch: each module's own entries, then its children's, with no de-duplication (a module
        registered twice appears under both names)."""
        stack = [(prefix.rstrip("."), self)]
        while stack:
            module_prefix, module = stack.pop()
            dot = module_prefix + "." if module_prefix else ""
            for name, value in module._parameters.items():
                if value is not None:
                    yield dot + name, value
            for name, value in module._buffers.items():
                if value is not None and name not in module._non_persistent:
                    yield dot + name, value
            stack.extend(reversed([(dot + key, child) for key, child in module._modules.items()
                                   if child is not None]))

    def load_state_dict(self, state_dict, strict=True):
        """Copy values in place (bumping versions, like PyTorch's ``copy_``). Shape mismatches are errors
        always; missing and unexpected keys only when ``strict``. Returns (missing_keys, unexpected_keys)."""
        own = OrderedDict(self._state_items())
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        errors = []
        if strict:
            if missing:
                errors.append("Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ". ")
            if unexpected:
                errors.append("Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected)
                              + ". ")
        ready = []
        for key, target in own.items():
            if key not in state_dict:
                continue
            source = state_dict[key]
            array = source._data if isinstance(source, Variable) else np.asarray(source)
            if array.shape != target._data.shape:
                errors.append(f"size mismatch for {key}: copying a param with shape {_size(array.shape)} from "
                              f"checkpoint, the shape in current model is {_size(target._data.shape)}.")
                continue
            ready.append((target, array))
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {self._get_name()}:\n\t" + "\n\t".join(errors))
        with grad_mode.no_grad():
            for target, array in ready:
                if array is not target._data:
                    target.copy_(array)
        return _IncompatibleKeys(missing, unexpected)

    # ----- text -------------------------------------------------------------------------------------
    def _get_name(self):
        return type(self).__name__

    def extra_repr(self):
        return ""

    def __repr__(self):
        lines = self.extra_repr().split("\n") if self.extra_repr() else []
        children = [f"({key}): {_indent(repr(module), 2)}" for key, module in self._modules.items()]
        if len(lines) == 1 and not children:
            return f"{self._get_name()}({lines[0]})"
        body = lines + children
        if not body:
            return f"{self._get_name()}()"
        return self._get_name() + "(\n  " + "\n  ".join(body) + "\n)"

    def __dir__(self):
        keys = set(super().__dir__()) | set(self._parameters) | set(self._buffers) | set(self._modules)
        return sorted(k for k in keys if not k[0].isdigit())


def _indent(text, spaces):
    """Indent every line but the first (a child's repr continues after its ``(name): `` label)."""
    lines = text.split("\n")
    return lines[0] if len(lines) == 1 else "\n".join([lines[0]] + [" " * spaces + line for line in lines[1:]])


def _size(shape):
    return f"torch.Size([{', '.join(str(d) for d in shape)}])"


def _detached(value):
    """A state_dict entry: same memory and version counter, no grad, no history (quietly: no observer)."""
    v = Variable.__new__(Variable)
    v._init(value._data)
    v._vc = value._vc
    return v


def _clear_grad(p, set_to_none):
    g = p._grad
    if g is None:
        return
    if set_to_none:
        p._grad = None
    elif g._data.flags.writeable:
        g._data.fill(0)
        g._vc.value += 1
    else:
        g._data = np.zeros_like(g._data)
