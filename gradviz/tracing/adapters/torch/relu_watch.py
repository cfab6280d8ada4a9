"""ReLU calls on full iterations, on PyTorch (``tracing/dead_units.py`` says what is kept): the mode's handler
for ``F.relu``, ``torch.relu`` and ``Tensor.relu`` (and their in-place forms) runs the call as any op, then
counts the units of the output that are non-zero somewhere in the batch (one reduction). The counts stay on the
device, here, until the iteration's calls are read together (``ReluCounts``: one host sync an iteration, where
reading each would wait for the device at every ReLU call); the trace's ``DeadUnits`` gets numbers."""

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
        counts = getattr(adapter, "relu_counts", None)
        if counts is None:
            counts = adapter.relu_counts = ReluCounts(facts.dead_units)
        counts.add(location, path, cls, _feeder(adapter, x), units, alive, builder.current_iteration())


PENDING_LIMIT = 4096  # counts held unread, at most (then read at once)


class ReluCounts:
    """One adapter's ReLU calls whose count of live units is still a device tensor: read together, by one call of
    ``_read_counts``, when a later iteration's first count arrives or the trace's ``DeadUnits`` writes its section
    (its ``settle``), and handed in as numbers."""

    def __init__(self, dead_units):
        self.dead_units = dead_units
        self.pending = []  # (location, path, cls, feeder, units, the count of units alive unread, iteration)
        dead_units.settle = self.settle

    def add(self, location, path, cls, feeder, units, alive, iteration):
        pending = self.pending
        if pending and (pending[-1][6] != iteration or len(pending) >= PENDING_LIMIT):
            self.settle()
        self.pending.append((location, path, cls, feeder, units, alive, iteration))

    def settle(self):
        pending, self.pending = self.pending, []
        if not pending:
            return
        for (location, path, cls, feeder, units, _, iteration), alive in zip(
                pending, _read_counts([p[5] for p in pending])):
            self.dead_units.call(location, path, cls, feeder, units, units - alive, iteration)


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
