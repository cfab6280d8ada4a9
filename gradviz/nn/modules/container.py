"""Containers: ``Sequential`` (runs its children in order), ``ModuleList`` and ``ModuleDict`` (hold them),
``ParameterList`` and ``ParameterDict``."""

import operator
from collections import OrderedDict

from ...autograd.variable import Variable
from ..module import Module, _indent
from ..parameter import Parameter


def _index(idx, size):
    idx = operator.index(idx)
    if not -size <= idx < size:
        raise IndexError(f"index {idx} is out of range")
    return idx % size


class Sequential(Module):
    """``Sequential(m1, m2, ...)`` or ``Sequential(OrderedDict(name=module))``; indexable like a list."""

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for name, module in args[0].items():
                self.add_module(name, module)
        else:
            for i, module in enumerate(args):
                self.add_module(str(i), module)

    def forward(self, input):
        for module in self._modules.values():
            input = module(input)
        return input

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        return list(self._modules.values())[_index(idx, len(self._modules))]

    def __setitem__(self, idx, module):
        key = list(self._modules)[_index(idx, len(self._modules))]
        setattr(self, key, module)

    def __delitem__(self, idx):
        keys = list(self._modules)
        for key in keys[idx] if isinstance(idx, slice) else [keys[_index(idx, len(keys))]]:
            del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        for module in modules:
            self.append(module)
        return self

    def insert(self, index, module):
        if not isinstance(module, Module):
            raise AssertionError(f"module should be of type: {Module}")
        n = len(self._modules)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index}")
        index = index + n if index < 0 else index
        items = list(self._modules.values())
        items.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(items):
            self._modules[str(i)] = m
        return self


class ModuleList(Module):
    """A list of modules, registered so their parameters are found; it has no forward of its own."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[str(_index(idx, len(self._modules)))]

    def __setitem__(self, idx, module):
        setattr(self, str(_index(idx, len(self._modules))), module)

    def __delitem__(self, idx):
        items = list(self._modules.values())
        if isinstance(idx, slice):
            del items[idx]
        else:
            del items[_index(idx, len(items))]
        self._renumber(items)

    def _renumber(self, items):
        self._modules.clear()
        for i, m in enumerate(items):
            self._modules[str(i)] = m

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __iadd__(self, modules):
        return self.extend(modules)

    def __add__(self, other):
        return type(self)(list(self) + list(other))

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        if isinstance(modules, Module) and not isinstance(modules, (ModuleList, Sequential)) or \
                not hasattr(modules, "__iter__"):
            raise TypeError("ModuleList.extend should be called with an iterable, but got "
                            + type(modules).__name__)
        for module in modules:
            self.append(module)
        return self

    def insert(self, index, module):
        items = list(self._modules.values())
        items.insert(index, module)
        self._renumber(items)

    def __repr__(self):
        # Like PyTorch: consecutive children with the same text collapse to "(0-2): 3 x Linear(...)".
        runs = []
        for key, module in self._modules.items():
            text = repr(module)
            if runs and runs[-1][2] == text:
                runs[-1][1] = key
                runs[-1][3] += 1
            else:
                runs.append([key, key, text, 1])
        if not runs:
            return "ModuleList()"
        lines = []
        for first, last, text, count in runs:
            label = f"({first})" if count == 1 else f"({first}-{last}): {count} x"
            lines.append(f"{label}: {_indent(text, 2)}" if count == 1 else f"{label} {_indent(text, 2)}")
        return "ModuleList(\n  " + "\n  ".join(lines) + "\n)"


# ----- issue 8: ModuleDict and ParameterList --------------------------------------------------------------
class ModuleDict(Module):
    """Modules by name, registered so their parameters are found; insertion order is kept."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def clear(self):
        self._modules.clear()

    def pop(self, key):
        value = self[key]
        del self[key]
        return value

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules):
        if not hasattr(modules, "__iter__") or isinstance(modules, Module) and not isinstance(modules, ModuleDict):
            raise TypeError("ModuleDict.update should be called with an iterable of key/value pairs, but got "
                            + type(modules).__name__)
        pairs = modules.items() if isinstance(modules, (dict, ModuleDict)) else modules
        for j, pair in enumerate(pairs):
            if not isinstance(pair, (tuple, list)):
                raise TypeError(f"ModuleDict update sequence element #{j} should be Iterable; is "
                                + type(pair).__name__)
            if len(pair) != 2:
                raise ValueError(f"ModuleDict update sequence element #{j} has length {len(pair)}; 2 is required")
            self[pair[0]] = pair[1]


class ParameterList(Module):
    """Parameters in a list, registered under "0", "1"…; a plain tensor appended becomes a Parameter."""

    def __init__(self, values=None):
        super().__init__()
        self.__dict__["_size"] = 0
        if values is not None:
            self.extend(values)

    def _key(self, idx):
        idx = operator.index(idx)
        if not -len(self) <= idx < len(self):
            raise IndexError(f"index {idx} is out of range")
        return str(idx % len(self))

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)([self[i] for i in range(*idx.indices(len(self)))])
        return getattr(self, self._key(idx))

    def __setitem__(self, idx, param):
        key = self._key(idx)
        if isinstance(param, Variable) and not isinstance(param, Parameter):
            param = Parameter(param)
        setattr(self, key, param)

    def __len__(self):
        return self._size

    def __iter__(self):
        return iter([self[i] for i in range(len(self))])

    def __iadd__(self, parameters):
        return self.extend(parameters)

    def append(self, value):
        self.__dict__["_size"] += 1
        self[len(self) - 1] = value
        return self

    def extend(self, values):
        if not hasattr(values, "__iter__") or isinstance(values, Variable):
            raise TypeError("ParameterList.extend should be called with an iterable, but got "
                            + type(values).__name__)
        for value in values:
            self.append(value)
        return self

    def extra_repr(self):
        lines = []
        for k, p in enumerate(self):
            if isinstance(p, Variable):
                kind = "Parameter" if isinstance(p, Parameter) else "Tensor"
                size = "x".join(str(d) for d in p.shape)
                lines.append(f"  ({k}): {kind} containing: [torch.{p.dtype} of size {size}]")
            else:
                lines.append(f"  ({k}): Object of type: {type(p).__name__}")
        return "\n".join(lines)

    def __call__(self, *args, **kwargs):
        raise RuntimeError("ParameterList should not be called.")


class ParameterDict(Module):
    """Parameters by name; a plain tensor stored becomes a Parameter."""

    def __init__(self, parameters=None):
        super().__init__()
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key):
        return self._parameters[key]

    def __setitem__(self, key, value):
        if isinstance(value, Variable) and not isinstance(value, Parameter):
            value = Parameter(value)
        self.register_parameter(key, value)

    def __delitem__(self, key):
        del self._parameters[key]

    def __len__(self):
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters)

    def __contains__(self, key):
        return key in self._parameters

    def keys(self):
        return self._parameters.keys()

    def items(self):
        return self._parameters.items()

    def values(self):
        return self._parameters.values()

    def get(self, key, default=None):
        return self._parameters.get(key, default)

    def pop(self, key):
        value = self[key]
        del self[key]
        return value

    def clear(self):
        self._parameters.clear()

    def update(self, parameters):
        pairs = parameters.items() if isinstance(parameters, (dict, ParameterDict)) else parameters
        for key, value in pairs:
            self[key] = value

    def extra_repr(self):
        lines = []
        for k, p in self._parameters.items():
            kind = "Parameter" if isinstance(p, Parameter) else "Tensor"
            size = "x".join(str(d) for d in p.shape)
            lines.append(f"  ({k}): {kind} containing: [{_torch_type_name(p.dtype)} of size {size}]")
        return "\n".join(lines)

    def __call__(self, *args, **kwargs):
        raise RuntimeError("ParameterDict should not be called.")


def _torch_type_name(dtype):
    return {"float32": "torch.FloatTensor", "float64": "torch.DoubleTensor", "int64": "torch.LongTensor"}.get(
        str(dtype), f"torch.{dtype}")
