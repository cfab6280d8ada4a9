"""``snapshot(tensor)``: the trace document of a PyTorch graph that already exists, no trace needed (what
torchviz's ``make_dot`` draws), for ``gradviz.render(loss)`` on a real torch tensor.

It walks back from the tensors' ``grad_fn`` through ``next_functions`` and describes what it finds: PyTorch's
nodes (``AddmmBackward0``), edges, the shapes they produce, saved tensors with their versions, the leaves.
Parameters are named from ``model`` when given, else from the modules the caller's frame binds
(``model.fc.weight``); with a model, a node that uses a parameter is placed in the module owning it, so the
picture has module clusters. Lines and module calls are only seen live: trace the forward pass for those.
"""

from ...builder import TraceBuilder
from ...frames import _locals, name_in_frames
from ...snapshot_args import flattened
from .engine import TorchAdapter
from .frames import user_frame


def snapshot(*tensors, model=None):
    """The trace document (a dict, see docs/trace-format.md) of the graph behind ``tensors``."""
    import torch

    builder = TraceBuilder()
    adapter = TorchAdapter(builder)  # describes; never attached
    frame = user_frame(1)
    roots = []
    if model is not None:
        roots.append((model, name_in_frames(frame, model) or "model"))
    elif frame is not None:
        for items in (_locals(frame), list(frame.f_globals.items())):
            for name, obj in items:
                if not name.startswith("_") and isinstance(obj, torch.nn.Module):
                    roots.append((obj, name))
    for module, name in roots:
        adapter.names.name_tree(module, name)
        found = adapter.names.take_new_parameters()
        builder.parameter_names({key: path for key, (_, path) in found.items()})
        if model is not None:
            adapter.owners = _owners(module, name)
    for t in flattened(tensors):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"snapshot() takes torch tensors, got {type(t).__name__}")
        adapter.describe(t)
    adapter.finish(frame)
    builder.stop()
    return builder.document(with_diagnostics=False)


def _owners(model, name):
    """``{id(parameter): module stack}`` (outermost first) of the module that owns each parameter directly."""
    owners = {}
    for sub, module in model.named_modules():
        parts = sub.split(".") if sub else []
        stack = tuple([name] + [".".join([name] + parts[:i + 1]) for i in range(len(parts))])
        for p in module.parameters(recurse=False):
            owners.setdefault(id(p), stack)
    return owners
