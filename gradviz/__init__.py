"""gradviz: a graph-visualizing debugger for automatic differentiation, on its own numpy autograd engine.

The engine mirrors PyTorch's names, so ``import gradviz as torch`` runs small PyTorch scripts. The debugger
(``trace``, ``explain``, ``render``) is loaded on first use, so importing the engine pulls in numpy alone.

The package itself loads nothing heavy: the engine's names (gradviz/_namespace.py) arrive together on first use
of any of them (``gradviz.zeros``, ``from gradviz import *``, ``dir(gradviz)``), so ``gradviz --help``, which
imports this package first, starts without numpy.
"""

from ._version import __version__ as __version__

# A public name that is also a submodule's name is bound here, before an engine import can bind the submodule
# under it (gradviz/device.py is light).
from .device import device as device

# Optional parts, each loaded on first use of its name: module, attribute (None: the module itself).
_LAZY = {
    "nn": ("gradviz.nn", None),
    "optim": ("gradviz.optim", None),
    "trace": ("gradviz.tracing", "trace"),
    "load_trace": ("gradviz.document", "load_trace"),
    "explain": ("gradviz.diagnose", "explain"),
    "render": ("gradviz.viz", "render"),
    "to_sarif": ("gradviz.viz", "to_sarif"),
    # `%load_ext gradviz`: IPython looks these up on the package
    "load_ipython_extension": ("gradviz.notebook", "load_ipython_extension"),
    "unload_ipython_extension": ("gradviz.notebook", "unload_ipython_extension"),
    "cuda": ("gradviz.cuda", None),
    "accelerator": ("gradviz.accelerator", None),
    "backends": ("gradviz.backends", None),
    "utils": ("gradviz.utils", None),
    "save": ("gradviz.serialization", "save"),
    "load": ("gradviz.serialization", "load"),
}
_engine = {"loaded": False}


def __getattr__(name):
    import importlib.util  # here, not at the top: the package's public namespace stays PyTorch's names

    if name in _LAZY:
        module_name, attr = _LAZY[name]
        module = importlib.import_module(module_name)
        value = module if attr is None else getattr(module, attr)
        globals()[name] = value
        return value
    # protocol probes (pickle, inspect, copy) and private names never load the engine
    if (name.startswith("_") and name != "__all__") or not name.isidentifier():
        raise AttributeError(f"module 'gradviz' has no attribute '{name}'")
    if importlib.util.find_spec(f"{__name__}.{name}") is not None:
        # a submodule (`from gradviz import document`, or `from . import autograd` while the engine loads):
        # importing it alone keeps the light ones light
        return importlib.import_module(f"{__name__}.{name}")
    _load_engine()
    try:
        return globals()[name]
    except KeyError:
        raise AttributeError(f"module 'gradviz' has no attribute '{name}'") from None


def __dir__():
    # the lazily loaded names are part of the namespace too (the --torch shim derives its names from it)
    _load_engine()
    return sorted(set(globals()) | set(_LAZY))


def _load_engine():
    if _engine["loaded"]:
        return
    import importlib

    namespace = importlib.import_module(f"{__name__}._namespace")
    names = {name: value for name, value in vars(namespace).items() if not name.startswith("_")}
    names["__all__"] = namespace.__all__
    globals().update(names)
    _engine["loaded"] = True
