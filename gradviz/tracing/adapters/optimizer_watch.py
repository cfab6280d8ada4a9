"""Where each optimizer was built, and over which parameters (tracing/training_facts.py, ``optimizers``): the
engine's ``Optimizer.__init__`` is wrapped while the trace is attached. One record per construction, with the
user's line, so a parameter made after the optimizer (a head replaced) or held where the optimizer never looked
(layers in a Python list) can be told from one left out on purpose (param-not-in-optimizer)."""

import functools
import weakref

from ..frames import location_at


def torch_optimizers(adapter):
    from .torch_frames import user_frame

    return OptimizerWatch(adapter, adapter.torch.optim.Optimizer, lambda: user_frame(0))


def gradviz_optimizers(adapter):
    from ...optim.optimizer import Optimizer
    from ..frames import user_frame

    return OptimizerWatch(adapter, Optimizer, lambda: user_frame(1))


class OptimizerWatch:
    def __init__(self, adapter, optimizer_class, find_frame):
        self.adapter = adapter
        self.optimizer_class = optimizer_class
        self.find_frame = find_frame
        self.facts = getattr(adapter.builder, "training", None)
        self._original = None

    def install(self):
        if self.facts is None or self._original is not None:
            return
        original = self._original = self.optimizer_class.__init__
        watch = self

        def __init__(optimizer, *args, **kwargs):
            original(optimizer, *args, **kwargs)
            if watch._original is not None:
                try:
                    watch.built(optimizer)
                except Exception as exc:  # our bookkeeping, never the script's problem
                    watch.adapter.builder.internal_error("optimizer", exc)

        self.optimizer_class.__init__ = functools.wraps(original)(__init__)

    def uninstall(self):
        if self._original is not None:
            self.optimizer_class.__init__ = self._original
            self._original = None

    def zero_grad(self, owner):
        """``owner.zero_grad()``: an optimizer's, or a module's (clearing every optimizer's gradients)."""
        if self.facts is not None and self._original is not None:
            key = id(owner) if hasattr(owner, "param_groups") else None
            self.facts.zero_grad(key, type(owner).__name__, self._location)

    def step(self, optimizer):
        if self.facts is not None and self._original is not None:
            self.facts.step(id(optimizer), type(optimizer).__name__, self._location,
                            self.adapter.builder.current_iteration())

    def event(self, owner, event):
        """gradviz's engine reports both as one observer event."""
        if event == "step":
            self.step(owner)
        elif event == "zero_grad":
            self.zero_grad(owner)

    def _location(self):
        frame = self.find_frame()
        return None if frame is None else location_at(frame.f_code, frame.f_lineno)

    def built(self, optimizer):
        frame = self.find_frame()
        location = None if frame is None else location_at(frame.f_code, frame.f_lineno)
        builder = self.adapter.builder
        groups = [[id(p) for p in group.get("params", ())] for group in getattr(optimizer, "param_groups", ())]
        with builder.lock:
            last = max((r.id for r in builder.live_variables.values()), default=-1)
        self.facts.optimizer_built(type(optimizer).__name__, weakref.ref(optimizer), groups, location,
                                   builder.current_iteration(), last)
