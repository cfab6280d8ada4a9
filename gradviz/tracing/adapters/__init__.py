"""Engine adapters: each watches one engine and reports facts to a ``TraceBuilder`` (see builder.py).

An adapter is a class taking the builder, with ``attach()`` / ``detach()`` (start and stop watching),
``finish(frame)`` (the trace stops; ``frame`` is the user's frame, for names), ``refresh()`` (before a document
is built while tracing), ``raised(exc, tb)`` (the traced block raised), and ``var_key(obj)`` / ``node_key(obj)``
for the objects it knows how to key (None for others). They are registered here by name and imported only when
a trace asks for them, so ``import gradviz`` imports no engine but its own.
"""

import importlib

_REGISTRY = {"gradviz": "gradviz.tracing.adapters.gradviz_engine:GradvizAdapter"}
ENGINES = ("auto", "gradviz", "torch")


def register(name, target):
    """Make ``engine=name`` use ``target``: an adapter class or ``"module.path:ClassName"`` (imported lazily)."""
    _REGISTRY[name] = target


def engine_names(engine):
    """The adapters an ``engine=`` choice means. ``"auto"`` is gradviz's engine (and, once its adapter is
    registered and torch is imported, PyTorch's too)."""
    if engine == "auto":
        names = ["gradviz"]
        auto = _REGISTRY.get("auto-extra")
        if callable(auto):
            names += list(auto())
        return names
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
