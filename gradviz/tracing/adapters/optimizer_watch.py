"""Where each optimizer was built, and over which parameters (tracing/training_facts.py, ``optimizers``), and
the order of backward, ``zero_grad``, ``step`` and gradient clipping (``zero_grad_before_step``,
``clip_order``). The engine's ``Optimizer.__init__`` and clipping functions are wrapped while the trace is
attached. One record per construction, with the user's line, so a parameter made after the optimizer (a head
replaced) or held where the optimizer never looked (layers in a Python list) can be told from one left out on
purpose (param-not-in-optimizer)."""

import functools
import weakref

from ..frames import location_at
from .grad_leak_watch import LeakWatch

CLIPS = ("clip_grad_norm_", "clip_grad_value_", "clip_grad_norm")


def torch_optimizers(adapter):
    from .torch_frames import user_frame

    torch = adapter.torch
    return OptimizerWatch(adapter, torch.optim.Optimizer, lambda: user_frame(0),
                          (torch.nn.utils, torch.nn.utils.clip_grad), adapter.var)


def gradviz_optimizers(adapter):
    from ...nn import utils
    from ...nn.utils import clip_grad
    from ...optim.optimizer import Optimizer
    from ..frames import user_frame

    return OptimizerWatch(adapter, Optimizer, lambda: user_frame(1), (utils, clip_grad), adapter.var_key)


class OptimizerWatch:
    """``clip_modules``: the namespaces whose gradient-clipping functions are wrapped while attached (their
    order against backward and step: clip-order)."""

    def __init__(self, adapter, optimizer_class, find_frame, clip_modules=(), register=None):
        self.adapter = adapter
        self.register = register  # a parameter -> its key, reporting it first (its variable id is then known)
        self.optimizer_class = optimizer_class
        self.find_frame = find_frame
        self.clip_modules = clip_modules
        self.facts = getattr(adapter.builder, "training", None)
        self._original = None
        self._clips = []  # (namespace, name, original) while wrapped
        # one optimizer's loss leaving gradients for another's step (gan-fake-not-detached)
        self.leaks = None if self.facts is None else LeakWatch(self.facts, self._location,
                                                               adapter.builder.current_iteration)

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
        wrapped = {}
        for namespace in self.clip_modules:
            for name in CLIPS:
                function = namespace.__dict__.get(name)
                if function is None:
                    continue
                if id(function) not in wrapped:
                    wrapped[id(function)] = self._wrap_clip(name, function)
                self._clips.append((namespace, name, function))
                setattr(namespace, name, wrapped[id(function)])

    def _wrap_clip(self, name, original):
        watch = self

        def clip(*args, **kwargs):
            if watch._original is not None:
                try:
                    watch.facts.clip(name, watch._location, watch.adapter.builder.current_iteration())
                except Exception as exc:  # our bookkeeping, never the script's problem
                    watch.adapter.builder.internal_error("clip", exc)
            return original(*args, **kwargs)

        return functools.wraps(original)(clip)

    def uninstall(self):
        if self._original is not None:
            self.optimizer_class.__init__ = self._original
            self._original = None
        for namespace, name, function in reversed(self._clips):
            setattr(namespace, name, function)
        self._clips = []

    def zero_grad(self, owner):
        """``owner.zero_grad()``: an optimizer's, or a module's (clearing every optimizer's gradients)."""
        if self.facts is not None and self._original is not None:
            key = id(owner) if hasattr(owner, "param_groups") else None
            self.facts.zero_grad(key, type(owner).__name__, self._location)
            self._leaks("zero_grad", owner)

    def step(self, optimizer):
        if self.facts is not None and self._original is not None:
            self.facts.step(id(optimizer), type(optimizer).__name__, self._location,
                            self.adapter.builder.current_iteration())
            self._leaks("step", optimizer)

    def _leaks(self, event, owner):
        try:
            before = len(self.facts.leaks)
            getattr(self.leaks, event)(owner)
            if len(self.facts.leaks) > before:  # a new finding: the next iterations record the graph that shows it
                builder = self.adapter.builder
                with builder.lock:
                    builder.schedule.fire(builder.current_iteration(), "finding")
        except Exception as exc:  # our bookkeeping, never the script's problem
            self.adapter.builder.internal_error("optimizer " + event, exc)

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
        with builder.lock:
            last = max((r.id for r in builder.live_variables.values()), default=-1)
            # the parameters' variable ids now: a document made after the model is gone still names them
            live, register = builder.live_variables, self.register
            groups = [[live[register(p)].id if register is not None else id(p) for p in group.get("params", ())]
                      for group in getattr(optimizer, "param_groups", ())]
        self.facts.optimizer_built(type(optimizer).__name__, weakref.ref(optimizer), groups, location,
                                   builder.current_iteration(), last)
        self.leaks.built(optimizer)
