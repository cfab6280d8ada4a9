"""ReLU calls on full iterations, on PyTorch (``tracing/dead_units.py`` says what is kept): the mode's handler
for ``F.relu``, ``torch.relu`` and ``Tensor.relu`` (and their in-place forms) runs the call as any op, then
counts the units of the output that are non-zero somewhere in the batch (one reduction). The counts stay on the
device until the iteration's calls are read together (``DeadUnits.later``: one host sync an iteration, where
reading each would wait for the device at every ReLU call)."""

from ...frames import location_at
from . import graph as tg
from .frames import user_frame


def relu_functions(torch):
    F = torch.nn.functional
    T = torch.Tensor
    return [f for f in (F.relu, F.relu_, torch.relu, torch.relu_, T.relu, T.relu_) if f is not None]


def relu_call(adapter, func, args, kwargs):
    result = adapter.op(func, args, kwargs)
    try:
        _measure(adapter, args[0] if args else kwargs.get("input"), result)
    except Exception as exc:  # our bookkeeping, never the script's problem
        adapter.internal_error("relu", exc)
    return result


def _measure(adapter, x, out):
    Tensor = adapter._Tensor
    facts = getattr(adapter.builder, "training", None)  # (a builder without the training facts: nothing kept)
    torch = adapter.torch
    if facts is None or (not isinstance(out, Tensor) or out.dim() < 2 or out.shape[0] < 2 or not out.is_floating_point()
            or out.layout is not torch.strided or out.is_meta):
        return
    n = out.shape[0]
    units = out.numel() // n
    if not units:
        return
    with torch.no_grad():
        alive = torch.count_nonzero(out.detach().reshape(n, units).any(0))
    frame = user_frame(0)
    location = None if frame is None else location_at(frame.f_code, frame.f_lineno)
    builder = adapter.builder
    with adapter.lock:
        stack = builder.module_stack
        path = stack[-1] if stack else None
        cls = builder.modules.get(path) if path is not None else None
        facts.dead_units.later(location, path, cls, _feeder(adapter, x), units, alive, builder.current_iteration(),
                               _read_counts)


def _read_counts(counts):
    """The counts (0-dim integer tensors) as ints: one stack and one copy to the host per device. Unobserved: the
    section may be written while the trace's mode is still on this thread's stack (a snapshot)."""
    import torch

    by_device = {}
    for i, c in enumerate(counts):
        by_device.setdefault(c.device, []).append(i)
    values = [0] * len(counts)
    with torch.no_grad(), torch._C.DisableTorchFunction():
        for indices in by_device.values():
            for i, v in zip(indices, torch.stack([counts[i] for i in indices]).tolist()):
                values[i] = v
    return values


def _feeder(adapter, x):
    """(module path, class, op, location) of the recorded node that made ``x``, or None."""
    fn = tg.grad_fn_of(x) if isinstance(x, adapter._Tensor) else None
    tag = None if fn is None else fn.metadata.get(tg.KEY)
    rec = None if tag is None or tag.owner is not adapter else adapter.builder.live_nodes.get(tag.id)
    if rec is None:
        return None
    path = rec.module[-1] if rec.module else None
    return path, adapter.builder.modules.get(path) if path is not None else None, rec.op, rec.location
