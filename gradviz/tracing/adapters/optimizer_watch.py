"""Where each optimizer was built, and over which parameters (tracing/training_facts.py, ``optimizers``), and
the order of backward, ``zero_grad``, ``step`` and gradient clipping (``zero_grad_before_step``,
``clip_order``). The engine's ``Optimizer.__init__`` and clipping functions are wrapped while the trace is
attached. One record per construction, with the user's line, so a parameter made after the optimizer (a head
replaced) or held where the optimizer never looked (layers in a Python list) can be told from one left out on
purpose (param-not-in-optimizer). An optimizer built before the trace started is adopted: those the entering
frame names at the start (``opt = Adam(...)`` above ``with gradviz.trace():``, so the first backward already
knows the loop has an optimizer), any other at its first ``zero_grad`` or ``step``; its record has no line.
Learning-rate schedulers are followed the same way: each construction and
each ``step()`` called by the user (not the ones a scheduler makes itself, when built or inside
``SequentialLR``), with the learning rate it set (scheduler-misuse)."""

import functools
import sys
import warnings
import weakref

from ..frames import _CO_OPTIMIZED, _locals, location_at
from .grad_leak_watch import LeakWatch

CLIPS = ("clip_grad_norm_", "clip_grad_value_", "clip_grad_norm")


def torch_optimizers(adapter):
    from .torch.frames import user_frame

    torch = adapter.torch
    return OptimizerWatch(adapter, torch.optim.Optimizer, lambda: user_frame(0),
                          (torch.nn.utils, torch.nn.utils.clip_grad), adapter.var, torch.optim.lr_scheduler,
                          _torch_mean_loss)


def gradviz_optimizers(adapter):
    from ...nn import utils
    from ...nn.utils import clip_grad
    from ...optim import lr_scheduler
    from ...optim.optimizer import Optimizer
    from ..frames import user_frame

    return OptimizerWatch(adapter, Optimizer, lambda: user_frame(1), (utils, clip_grad), adapter.var_key,
                          lr_scheduler, _gradviz_mean_loss)


class OptimizerWatch:
    """``clip_modules``: the namespaces whose gradient-clipping functions are wrapped while attached (their
    order against backward and step: clip-order); ``schedulers``: the engine's ``lr_scheduler`` module, whose
    scheduler classes' ``__init__`` and ``step`` are wrapped while attached (scheduler-misuse)."""

    def __init__(self, adapter, optimizer_class, find_frame, clip_modules=(), register=None, schedulers=None,
                 mean_loss=None):
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
        self.schedulers = schedulers
        self.mean_loss = mean_loss  # a backward root's node -> whether it is a loss averaged over its batch
        self._scheduler_hooks = None  # the schedulers' wrapped methods (_SchedulerHooks) while installed
        self._known = weakref.WeakSet()  # the optimizers recorded, built under the trace or adopted

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
        self._adopt_named()
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
        self._wrap_schedulers()

    def _wrap_schedulers(self):
        if self.schedulers is not None:
            self._scheduler_hooks = _scheduler_hooks(self.schedulers)
            self._scheduler_hooks.add(self)

    def _scheduler_built(self, scheduler):
        optimizer = getattr(scheduler, "optimizer", None)
        self.facts.scheduler_built(id(scheduler), type(scheduler).__name__, id(optimizer), _first_lr(optimizer),
                                   self._location(), self.adapter.builder.current_iteration())

    def _scheduler_stepped(self, scheduler):
        optimizer = getattr(scheduler, "optimizer", None)
        self.facts.scheduler_step(id(scheduler), type(scheduler).__name__, id(optimizer), _first_lr(optimizer),
                                  self._location, self.adapter.builder.current_iteration())

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
        if self._scheduler_hooks is not None:
            self._scheduler_hooks.remove(self)
            self._scheduler_hooks = None

    def _adopt_named(self):
        """The optimizers the frame entering the trace names (its locals, its module's globals)."""
        try:
            frame = self.find_frame()
            if frame is None:
                return
            values = list(frame.f_globals.values())
            if frame.f_code.co_flags & _CO_OPTIMIZED:
                values += [value for _, value in _locals(frame)]
            del frame
            for value in values:
                if isinstance(value, self.optimizer_class):
                    self.adopt(value)
        except Exception as exc:  # our bookkeeping, never the script's problem
            self.adapter.builder.internal_error("optimizer", exc)

    def adopt(self, optimizer):
        """Record ``optimizer`` as built before the trace (no line), unless it is recorded already."""
        if optimizer not in self._known:
            self._record(optimizer, None)

    def zero_grad(self, owner):
        """``owner.zero_grad()``: an optimizer's, or a module's (clearing every optimizer's gradients)."""
        if self.facts is not None and self._original is not None:
            if isinstance(owner, self.optimizer_class) and owner not in self._known:
                self.adopt(owner)
            key = id(owner) if hasattr(owner, "param_groups") else None
            self.facts.zero_grad(key, type(owner).__name__, self._location)
            if self.leaks.watching:
                self._leaks("zero_grad", owner)

    def step(self, optimizer):
        if self.facts is not None and self._original is not None:
            if optimizer not in self._known and isinstance(optimizer, self.optimizer_class):
                self.adopt(optimizer)
            self.facts.step(id(optimizer), type(optimizer).__name__, self._location,
                            self.adapter.builder.current_iteration())
            modes = getattr(self.adapter, "training_watch", None)
            if modes is not None:  # a module "frozen" by a plain attribute: do its parameters still train?
                modes.stepped(optimizer, self._location)
            if self.leaks.watching:
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

    def backward(self, location, root, value=None):
        """A backward (not ``autograd.grad``) at ``location`` from ``root``, the node of its single root (None
        when it has several, or none), whose value is ``value`` (a float, or None): how many per step, on what
        kind of loss (accumulation-not-scaled), and the loss's course (loss-diverging)."""
        if self.facts is not None and self._original is not None:
            mean = root is not None and self.mean_loss is not None and self.mean_loss(root)
            self.facts.backward_root(location, _op_name(root), mean)
            if value is not None:
                self.facts.loss_value(location, value, self.adapter.builder.current_iteration())

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
        self._record(optimizer, None if frame is None else location_at(frame.f_code, frame.f_lineno))

    def _record(self, optimizer, location):
        self._known.add(optimizer)
        builder = self.adapter.builder
        with builder.lock:
            last = max((r.id for r in builder.live_variables.values()), default=-1)
            # the parameters' variable ids now: a document made after the model is gone still names them
            live, register = builder.live_variables, self.register
            groups = [[live[register(p)].id if register is not None else id(p) for p in group.get("params", ())]
                      for group in getattr(optimizer, "param_groups", ())]
        self.facts.optimizer_built(type(optimizer).__name__, weakref.ref(optimizer), groups, location,
                                   builder.current_iteration(), last, lr=_first_lr(optimizer))
        self.leaks.built(optimizer)


_HOOKS = {}  # an engine's lr_scheduler module -> its _SchedulerHooks


def _scheduler_hooks(module):
    hooks = _HOOKS.get(module)
    if hooks is None:
        hooks = _HOOKS[module] = _SchedulerHooks(module)
    return hooks


class _SchedulerHooks:
    """The ``__init__`` and ``step`` of an engine's scheduler classes, wrapped while at least one watch is
    installed; each outermost call is reported to every installed watch. The classes are found and the wrappers
    made once (an "mlp step" case starts a trace per step: wrapping anew at each start cost ~300 calls)."""

    def __init__(self, module):
        self.module = module
        self.watches = []  # the installed OptimizerWatches, in the order they came
        self.depth = 0  # scheduler calls in progress: only the outermost is the user's
        self.methods = []  # [class, name, original, wrapper] of each method wrapped
        base = getattr(module, "LRScheduler", None)
        if base is None:
            return
        seen = set()
        for cls in list(vars(module).values()):
            if not (isinstance(cls, type) and issubclass(cls, base)) or cls in seen:
                continue  # (a class under two names, ``_LRScheduler = LRScheduler``, is wrapped once)
            seen.add(cls)
            for name in ("__init__", "step"):
                original = cls.__dict__.get(name)
                if original is not None:
                    self.methods.append([cls, name, original, self._wrap(original, name)])

    def add(self, watch):
        if not self.watches:
            for entry in self.methods:
                cls, name, original, _ = entry
                now = cls.__dict__.get(name)
                if now is not original:  # replaced by someone else since: wrap what is there now
                    entry[2], entry[3] = now, self._wrap(now, name)
                setattr(cls, name, entry[3])
        self.watches.append(watch)

    def remove(self, watch):
        if watch in self.watches:
            self.watches.remove(watch)
            if not self.watches:
                for cls, name, original, _ in reversed(self.methods):
                    setattr(cls, name, original)

    def _wrap(self, original, name):
        hooks = self
        built = name == "__init__"

        def method(scheduler, *args, **kwargs):
            outermost = hooks.depth == 0
            hooks.depth += 1
            try:
                if not outermost:
                    return original(scheduler, *args, **kwargs)
                # the scheduler's own warnings (``stacklevel=2``: "step() before optimizer.step()") would name
                # this wrapper: they are caught and given again at the user's line
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    result = original(scheduler, *args, **kwargs)
            finally:
                hooks.depth -= 1
            if caught:
                _warn_at(caught, sys._getframe(1))
            for watch in list(hooks.watches):
                if watch._original is not None:
                    try:
                        (watch._scheduler_built if built else watch._scheduler_stepped)(scheduler)
                    except Exception as exc:  # our bookkeeping, never the script's problem
                        watch.adapter.builder.internal_error("lr_scheduler", exc)
            return result

        return functools.wraps(original)(method)


def _first_lr(optimizer):
    """The learning rate of ``optimizer``'s first parameter group (what a schedule sets), or None."""
    groups = getattr(optimizer, "param_groups", None)
    lr = groups[0].get("lr") if groups else None
    try:
        return float(lr)
    except (TypeError, ValueError):  # a tensor learning rate on another device, or none
        return None


def _warn_at(caught, frame):
    """Give the warnings ``caught`` in a scheduler call again as raised at ``frame`` (the user's call)."""
    registry = frame.f_globals.setdefault("__warningregistry__", {})
    for w in caught:
        warnings.warn_explicit(w.message, w.category, frame.f_code.co_filename, frame.f_lineno,
                               module=frame.f_globals.get("__name__"), registry=registry)


def _op_name(node):
    try:
        return None if node is None else node.name()
    except Exception:  # not a node that names itself
        return None


def _torch_mean_loss(node):
    """A loss node with ``reduction="mean"`` (PyTorch saves it as 1), or ``.mean()``."""
    return getattr(node, "_saved_reduction", None) == 1 or type(node).__name__ == "MeanBackward0"


def _gradviz_mean_loss(node):
    meta = getattr(node, "_meta", None)
    return (isinstance(meta, dict) and meta.get("reduction") == "mean") or type(node).__name__ == "MeanBackward"
