"""``gradviz.render`` and the notebook view: turn what the user holds into a trace document, then hand that to
rendering.

This is the layer above tracing and rendering, and the only code that knows both. Rendering reads documents
only (docs/trace-format.md) and never learns where one came from; tracing never imports rendering — a Trace's
Jupyter view (``Trace._repr_html_``) calls ``notebook_html`` here, imported when it is first shown.

What can be drawn is a list of sources, each a test and a converter, tried in order: a document, a saved trace
file, anything with ``to_dict()`` (a Trace), and a Variable of gradviz's engine (or a list of them), described
by ``gradviz.tracing.engine_snapshot``. Another engine adds its tensors with ``register_source``; its test must not
import that engine (a tensor of it can only exist once its module is in ``sys.modules``), so ``import gradviz``
stays light.
"""

import os
from collections.abc import Mapping

from .document import check_format, load_trace

_SOURCES = []  # [(name, matches(obj) -> bool, to_document(obj) -> document)]


def register_source(name, matches, to_document):
    """Teach ``render``/``as_document`` a new kind of object: ``matches(obj)`` says whether ``to_document(obj)``
    describes it. ``name`` is what the error for an unsupported object lists. Sources registered later are
    tried first, so an engine can claim a type before the generic ``to_dict()`` test."""
    _SOURCES.insert(0, (name, matches, to_document))


def as_document(obj):
    """The trace document for ``obj``: a document dict, a path to a saved trace, a Trace (``to_dict()``), a
    Variable or a list of Variables (their graph, described without a trace), or any registered source."""
    for _, matches, to_document in _SOURCES:
        if matches(obj):
            return to_document(obj)
    names = ", ".join(name for name, _, _ in _SOURCES)
    raise TypeError(f"render() takes {names}, not {type(obj).__name__}")


def render(source, path=None, format=None, budget=4.0, model=None, **options):
    """Draw the graph of ``source`` (see ``as_document``): returns a ``graphviz.Digraph`` (shown inline in
    Jupyter). The options are ``gradviz.rendering.render``'s: ``path``, ``format`` (svg, png, pdf, dot),
    ``budget`` (layout seconds), and ``build_graph``'s (iteration, depth, show_saved, show_grads, forward,
    max_nodes, graphs, and the three below). ``model``: for a PyTorch tensor, the ``nn.Module`` that computed it
    (its parameter names, and its modules as clusters).

    ``rankdir``: the layout direction, ``"TB"`` (top to bottom), ``"LR"`` (left to right), ``"BT"`` or ``"RL"``;
    default ``"BT"`` for the backward graph (the loss at the bottom) and ``"TB"`` for ``forward=True`` and
    ``architecture=True``. Anything else raises ``ValueError``.
    ``architecture``: draw the model as torchview does: the forward view with each module one box (its class,
    op and parameter counts, input and output shapes) and the ops between modules as ops; ``depth`` says how
    deep module boxes go (default: the depth that fits ``node_budget``).
    ``node_budget``: without ``depth``, a picture of more nodes than this (default 100) is drawn at the
    deepest module depth that fits it, and its subtitle says so; ``None`` draws every op (up to ``max_nodes``).

    Examples::

        gradviz.render(loss, "graph.svg", rankdir="LR")               # the backward graph, left to right
        gradviz.render(tr, "arch.png", architecture=True)             # a traced model as module boxes
        gradviz.render("report.json", "all.svg", node_budget=None)    # every op, however large
        gradviz.render(tr, "fwd.svg", forward=True, node_budget=40)   # the forward view, at most 40 nodes
    """
    from . import rendering

    if model is not None:
        if not _is_torch_tensor(source):
            raise TypeError(f"render(model=...) is for PyTorch tensors, not {type(source).__name__}")
        document = _torch_snapshot(source, model=model)
    else:
        document = as_document(source)
    return rendering.render(document, path=path, format=format, budget=budget, **options)


def notebook_html(source, **options):
    """HTML for Jupyter: a summary line, the graph and the diagnostics of ``source`` (see ``as_document``)."""
    from . import rendering

    return rendering.notebook_html(as_document(source), **options)


# -- the sources gradviz knows --------------------------------------------------------------------------------
def _is_document(obj):
    return isinstance(obj, Mapping)


def _is_path(obj):
    return isinstance(obj, (str, os.PathLike))


def _has_to_dict(obj):
    return callable(getattr(obj, "to_dict", None))


def _to_dict(obj):
    return check_format(obj.to_dict())


def _is_gradviz_variable(obj):
    from .autograd import Variable  # the engine is numpy-only: importing it here costs nothing extra

    items = obj if isinstance(obj, (list, tuple)) and obj else (obj,)
    return all(isinstance(item, Variable) for item in items)


def _snapshot(obj):
    from .tracing.engine_snapshot import snapshot

    return snapshot(*obj) if isinstance(obj, (list, tuple)) else snapshot(obj)


# Registered in reverse order of preference (each registration goes first). The torch backend (issue 7) hooks in
# here the same way: ``register_source("a torch tensor", is_torch_tensor, torch_snapshot)``, where the test looks
# the class up in ``sys.modules.get("torch")`` (so nothing imports torch) and the converter imports the torch
# adapter's ``snapshot`` only when called.
def _is_torch_tensor(obj):
    """A real PyTorch tensor (or a non-empty list of them), told by its class's module: nothing imports torch
    here, and under gradviz's `import torch` shim the name `torch` means gradviz."""
    items = obj if isinstance(obj, (list, tuple)) and obj else (obj,)
    return all(type(item).__module__.split(".")[0] == "torch" and hasattr(item, "grad_fn") for item in items)


def _torch_snapshot(obj, model=None):
    from .tracing.adapters.torch.snapshot import snapshot

    return snapshot(*obj, model=model) if isinstance(obj, (list, tuple)) else snapshot(obj, model=model)


register_source("a torch tensor (or a list of them)", _is_torch_tensor, _torch_snapshot)
register_source("a Variable (or a list of them)", _is_gradviz_variable, _snapshot)
register_source("a trace (anything with to_dict())", _has_to_dict, _to_dict)
register_source("a JSON path", _is_path, load_trace)
register_source("a trace document", _is_document, check_format)


def to_sarif(source, base=None):
    """The SARIF 2.1.0 log (a dict) of ``source``'s diagnostics (a trace, a document, a report.json path), its
    rules described by the diagnostics catalogue (``gradviz run --sarif FILE`` writes the same)."""
    from .rendering.sarif import to_sarif as sarif

    return sarif(as_document(source), base, sarif_catalogue())


def sarif_catalogue():
    """``[(code, severity, title, explanation)]``: the catalogue as the SARIF writer takes it."""
    from .diagnose.registry import catalogue

    return [(c.code, c.severity, c.title, c.explanation) for c in catalogue()]
