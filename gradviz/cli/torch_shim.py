"""``gradviz run --torch``: make ``import torch`` resolve to gradviz for one run.

A meta-path finder placed first on ``sys.meta_path`` answers for ``torch`` and every ``torch.*`` name, ahead of
any real PyTorch installed; real ``torch`` modules already imported are set aside and put back afterwards. Each
PyTorch module gradviz mirrors becomes a proxy that exposes exactly the names gradviz supports there. Any other
name fails with an error naming it and the closest supported name (an ``AttributeError`` subclass for
attributes, so ``hasattr`` still works, and a ``ModuleNotFoundError`` subclass for imports) — never a silently
different result.

The names are derived from gradviz's own namespaces (every public name a mirrored gradviz module has, minus the
debugger's), so a new op or layer appears behind the shim, in ``gradviz supported`` and in docs/api.md without a
list to keep; a test checks that each one exists at the same place in PyTorch.
"""

import difflib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types

from ..errors import UnsupportedNameError

# PyTorch module -> the gradviz module standing in for it (used only where the gradviz module exists).
MODULES = {
    "torch": "gradviz",
    "torch.autograd": "gradviz.autograd",
    "torch.autograd.functional": "gradviz.autograd.functional",
    "torch.nn": "gradviz.nn",
    "torch.nn.functional": "gradviz.nn.functional",
    "torch.nn.init": "gradviz.nn.init",
    "torch.nn.utils": "gradviz.nn.utils",
    "torch.nn.utils.rnn": "gradviz.nn.utils.rnn",
    "torch.optim": "gradviz.optim",
    "torch.optim.lr_scheduler": "gradviz.optim.lr_scheduler",
    "torch.utils": "gradviz.utils",
    "torch.utils.data": "gradviz.utils.data",
    "torch.cuda": "gradviz.cuda",
    "torch.accelerator": "gradviz.accelerator",
    "torch.backends": "gradviz.backends",
    "torch.backends.mps": "gradviz.backends.mps",
    "torch.backends.cudnn": "gradviz.backends.cudnn",
    "torch.version": "gradviz.version",
    "torch.torch_version": "gradviz.torch_version",
}

# Module constants a proxy carries as plain attributes (dunder and None-valued names are not otherwise
# exposed): ``torch.__version__`` is the PyTorch API level gradviz follows, labelled gradviz (gradviz/version.py).
_CONSTANTS = {"torch": {"__version__": ("gradviz.version", "__version__")},
              "torch.version": {name: ("gradviz.version", name) for name in
                                ("__version__", "debug", "cuda", "hip", "rocm", "xpu")}}

# Public gradviz names that are not PyTorch's (or mean something else there: ``torch.trace`` is a matrix trace).
_NOT_TORCH = {"trace", "load_trace", "explain", "render", "diagnose", "snapshot", "GradcheckError",
              "GradvizError"}
# Engine names that PyTorch keeps elsewhere (``torch.autograd.Function``, not ``torch.Function``).
_NOT_TORCH_IN = {"torch": {"Function", "Variable"}, "torch.autograd": {"Tensor", "is_grad_enabled"}}
# PyTorch names whose gradviz namesake is something else: behind the shim they are the engine's op
# (``torch.trace`` is the matrix trace; ``gradviz.trace`` stays the tracer).
_TORCH_MEANING = {"torch": {"trace": ("gradviz.ops.linalg", "trace")}}
# Tensor attributes gradviz adds (``creator`` is the seed's old PyTorch name for ``grad_fn``).
TENSOR_EXTRAS = {"creator", "is_view", "version"}
# Names whose objects come from these gradviz packages belong to the debugger, not to the engine.
_DEBUGGER_PACKAGES = ("gradviz.trace", "gradviz.tracing", "gradviz.diagnose", "gradviz.rendering", "gradviz.cli",
                      "gradviz.document", "gradviz.viz", "gradviz.notebook", "gradviz.integrations",
                      "gradviz.pytest_plugin")


_ENGINE_INTERNALS = ("gradviz.errors", "gradviz.autograd")


class TorchNameNotSupported(UnsupportedNameError):
    """A PyTorch module or module attribute that gradviz's engine does not provide."""


class UnsupportedTorchAttribute(TorchNameNotSupported, AttributeError):
    """``torch.X`` for an X gradviz lacks (an AttributeError, so ``hasattr(torch, "X")`` is simply False)."""


class UnsupportedTorchModule(TorchNameNotSupported, ModuleNotFoundError):
    """``import torch.X`` for a module gradviz lacks."""


def available_modules():
    """The PyTorch module names this gradviz can stand in for, in table order."""
    return [name for name, target in MODULES.items() if _module_exists(target)]


def _module_exists(target):
    try:
        return importlib.util.find_spec(target) is not None
    except ModuleNotFoundError:
        return False


def exposed_names(torch_name):
    """The public names the proxy for ``torch_name`` exposes, sorted: attributes of the gradviz module that are
    PyTorch's, plus the mirrored submodules."""
    target = importlib.import_module(MODULES[torch_name])
    mirrored = set(available_modules())
    # dir(), not a hand-kept __all__: every public name the gradviz module has is a candidate
    candidates = set(dir(target)) | set(getattr(target, "__all__", ()))
    # helpers a module imported for its own use (``Variable`` in nn.functional) are not its PyTorch names
    foreign = _ENGINE_INTERNALS if torch_name not in ("torch", "torch.autograd") else ("gradviz.errors",)
    names = set()
    for name in candidates:
        if name.startswith("_") or name in _NOT_TORCH or name in _NOT_TORCH_IN.get(torch_name, ()):
            continue
        value = getattr(target, name, None)
        if name in _CONSTANTS.get(torch_name, ()):
            continue  # added below, from the table
        if value is None or isinstance(value, types.ModuleType):
            continue  # submodules are added below, only where PyTorch has them
        if isinstance(value, (str, bytes, int, float, list, tuple, dict, set, frozenset)) and \
                not isinstance(value, bool):
            continue  # message texts, constants and name lists a module keeps for itself (POINTWISE_NAMES)
        defined_in = getattr(value, "__module__", None) or ""
        if defined_in.startswith(_DEBUGGER_PACKAGES) or \
                (defined_in.startswith(foreign) and defined_in != MODULES[torch_name]):
            continue
        if defined_in and not defined_in.startswith("gradviz"):
            continue  # a helper imported from the standard library or numpy (Counter, bisect_right)
        names.add(name)
    for module_name in mirrored:
        parent, _, leaf = module_name.rpartition(".")
        if parent == torch_name:
            names.add(leaf)
    names.update(_TORCH_MEANING.get(torch_name, ()))
    names.update(_CONSTANTS.get(torch_name, ()))
    return sorted(names)


def _torch_meaning(torch_name, name):
    """The engine object standing for ``torch_name.name`` when it is not gradviz's namesake, else None."""
    where = _TORCH_MEANING.get(torch_name, {}).get(name)
    return getattr(importlib.import_module(where[0]), where[1]) if where else None


def tensor_methods(extras=False):
    """Public methods and attributes of ``torch.Tensor`` (gradviz's ``Variable``) that PyTorch has too, sorted;
    with ``extras=True``, the ones only gradviz has."""
    from ..autograd import Variable

    names = {name for name in dir(Variable) if not name.startswith("_")}
    return sorted(names & TENSOR_EXTRAS if extras else names - TENSOR_EXTRAS)


class TorchProxy(types.ModuleType):
    """Stands in for one PyTorch module: supported names come from gradviz, anything else raises."""

    def __init__(self, torch_name, shim):
        super().__init__(torch_name)
        self.__path__ = []  # a package, so ``import torch.nn`` asks the finder for the submodule
        self.__all__ = [n for n in exposed_names(torch_name)]
        self._gradviz_target = importlib.import_module(MODULES[torch_name])
        self._gradviz_shim = shim
        self._gradviz_names = frozenset(self.__all__)
        for name, (module, attr) in _CONSTANTS.get(torch_name, {}).items():
            setattr(self, name, getattr(importlib.import_module(module), attr))

    def __getattr__(self, name):
        if name in self._gradviz_names:
            child = f"{self.__name__}.{name}"
            value = self._gradviz_shim.proxy(child) if child in MODULES else \
                _torch_meaning(self.__name__, name) or getattr(self._gradviz_target, name)
            if self.__name__ == "torch":
                value = _with_out_keyword(value, name)
            setattr(self, name, value)
            return value
        if name.startswith("__"):  # protocol probes (copy, pickle, inspect): plain and cheap
            raise AttributeError(f"module '{self.__name__}' has no attribute '{name}'")
        module = self.__name__  # the closest name is looked for only when the message is read (hasattr stays cheap)
        raise UnsupportedTorchAttribute(f"{module}.{name}", lambda: closest_name(module, name))

    def __dir__(self):
        return sorted(set(super().__dir__()) | self._gradviz_names)


def _with_out_keyword(value, name):
    """``torch.X`` ops take ``out=`` (``torch.add(x, y, out=r)``): a gradviz function lacking it gets the engine's
    generic ``out=`` handling (gradviz/out_arg.py); classes and modules are left as they are."""
    from ..out_arg import accepts_out, with_out

    if isinstance(value, types.FunctionType) and not accepts_out(value):
        return with_out(value, name)
    return value


class TorchShim(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Install with ``with TorchShim():`` (or ``install()``/``uninstall()``); restores everything on exit."""

    def __init__(self):
        self._proxies = {}
        self._set_aside = {}
        self._available = None
        self.installed = False

    def install(self):
        self._available = set(available_modules())
        for name in list(sys.modules):
            if name == "torch" or name.startswith("torch."):
                self._set_aside[name] = sys.modules.pop(name)
        sys.meta_path.insert(0, self)
        self.installed = True
        return self

    def uninstall(self):
        if not self.installed:
            return
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        for name in list(sys.modules):
            if name == "torch" or name.startswith("torch."):
                del sys.modules[name]
        sys.modules.update(self._set_aside)
        self._set_aside.clear()
        self._proxies.clear()
        self.installed = False

    def __enter__(self):
        return self.install()

    def __exit__(self, *exc_info):
        self.uninstall()

    def proxy(self, torch_name):
        if torch_name not in self._proxies:
            self._proxies[torch_name] = TorchProxy(torch_name, self)
            sys.modules.setdefault(torch_name, self._proxies[torch_name])
        return self._proxies[torch_name]

    # importlib finder/loader protocol
    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torch" and not fullname.startswith("torch."):
            return None
        if fullname not in self._available:
            parent, _, leaf = fullname.rpartition(".")
            raise UnsupportedTorchModule(fullname, closest_name(parent, leaf) if parent in self._available else None)
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        return self.proxy(spec.name)

    def exec_module(self, module):
        """Nothing to run: the proxy reads gradviz's module on demand."""


def closest_name(torch_name, name):
    """The supported name in ``torch_name`` closest to ``name`` (``torch.nn.LSTMM`` -> ``torch.nn.LSTM``), if any."""
    match = difflib.get_close_matches(name, exposed_names(torch_name), n=1, cutoff=0.75)
    return f"{torch_name}.{match[0]}" if match else None


def supported_names(prefix=""):
    """Every supported PyTorch name, dotted in full (``torch.nn.Linear``, ``torch.Tensor.add_``), that starts
    with ``prefix``, in module order then alphabetical."""
    names = []
    for torch_name in available_modules():
        names.extend(f"{torch_name}.{n}" for n in exposed_names(torch_name))
    names.extend(f"torch.Tensor.{n}" for n in tensor_methods())
    return [n for n in names if n.startswith(prefix)]


def supported_names_markdown():
    """The "Supported PyTorch names" list of docs/api.md, generated from what the shim exposes."""
    lines = []
    for torch_name in available_modules():
        names = exposed_names(torch_name)
        lines.append(f"### `{torch_name}`")
        lines.append("")
        lines.append(", ".join(f"`{n}`" for n in names))
        lines.append("")
    lines.append("### `torch.Tensor` methods and attributes")
    lines.append("")
    lines.append(", ".join(f"`{n}`" for n in tensor_methods()))
    lines.append("")
    lines.append("gradviz adds: " + ", ".join(f"`{n}`" for n in tensor_methods(extras=True)))
    return "\n".join(lines) + "\n"


BEGIN_MARK = "<!-- supported-names:begin (generated by `python -m gradviz.cli.torch_shim docs/api.md`) -->"
END_MARK = "<!-- supported-names:end -->"


def update_docs(path):
    """Rewrite the generated list between the markers in ``path``; returns whether it changed."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    start = text.index(BEGIN_MARK) + len(BEGIN_MARK)
    end = text.index(END_MARK)
    new = text[:start] + "\n\n" + supported_names_markdown() + "\n" + text[end:]
    if new != text:
        with open(path, "w", encoding="utf-8") as f:
            f.write(new)
    return new != text


if __name__ == "__main__":  # pragma: no cover - maintenance command for the docs
    for doc in sys.argv[1:]:
        print(f"{doc}: {'updated' if update_docs(doc) else 'up to date'}")
