"""Engine adapters: each watches one engine and reports facts to a ``TraceBuilder`` (see builder.py).

An adapter is a class taking the builder, with ``attach()`` / ``detach()`` (start and stop watching),
``finish(frame)`` (the trace stops; ``frame`` is the user's frame, for names), ``refresh()`` (before a document
is built while tracing), ``raised(exc, tb)`` (the traced block raised), and ``var_key(obj)`` / ``node_key(obj)``
for the objects it knows how to key (None for others). They are registered here by name and imported only when
a trace asks for them, so ``import gradviz`` imports no engine but its own.
"""

import importlib

_REGISTRY = {"gradviz": "gradviz.tracing.adapters.gradviz.engine:GradvizAdapter"}
_AUTO = []  # (name, when): engine="auto" also uses adapter ``name`` when ``when()`` is true
ENGINES = ("auto", "gradviz", "torch")


def register(name, target, auto_when=None):
    """Make ``engine=name`` use ``target``: an adapter class or ``"module.path:ClassName"`` (imported lazily).
    With ``auto_when`` (a function of no arguments), ``engine="auto"`` uses it too whenever that returns true
    (the torch adapter: when ``torch`` is imported)."""
    _REGISTRY[name] = target
    _AUTO[:] = [(n, w) for n, w in _AUTO if n != name]
    if auto_when is not None:
        _AUTO.append((name, auto_when))


def engine_names(engine):
    """The adapters an ``engine=`` choice means: ``"auto"`` is gradviz's engine plus every adapter registered
    with an ``auto_when`` that says yes now."""
    if engine == "auto":
        return ["gradviz"] + [name for name, when in _AUTO if when()]
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(repr(e) for e in ENGINES)}, got {engine!r}")
    if engine not in _REGISTRY:
        raise ValueError(f"engine={engine!r} is not available in this version of gradviz")
    return [engine]


def make_adapter(name, builder):
    target = _REGISTRY[name]
    if isinstance(target, str):
        module, _, cls = target.partition(":")
        target = _REGISTRY[name] = getattr(importlib.import_module(module), cls)
    return target(builder)


# Real PyTorch (imported only when a trace asks for it). engine="auto" watches it too: at once when torch is
# imported already, else from the moment it is imported (torch/lazy), when it is installed.
def _torch_imported():
    import sys

    return "torch" in sys.modules


def _torch_installed_not_imported():
    from .torch.lazy import torch_engines

    return torch_engines() == ["torch-when-imported"]


register("torch", "gradviz.tracing.adapters.torch.engine:TorchAdapter", auto_when=_torch_imported)
register("torch-when-imported", "gradviz.tracing.adapters.torch.lazy:TorchWhenImported",
         auto_when=_torch_installed_not_imported)
