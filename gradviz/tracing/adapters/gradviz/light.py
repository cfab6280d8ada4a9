"""gradviz's engine on light iterations (tracing/schedule.py): the per-op observer callbacks off.

On a light iteration the adapter's guard is detached from the engine and this small observer is attached in its
place: the engine's per-op, per-variable and per-backward-step callbacks reach only ``Observer``'s no-op methods.
What it watches: module calls (the iteration's signature), each backward's roots (NaN/Inf, and a weak reference to
each root's node: graphs alive), and each optimizer step (every parameter's gradient norm, and the iteration's end).
Only the context that attached the trace switches; threads keep the guard (full).

And the rare calls where the classic mistakes happen, as on PyTorch (``torch/watch``): a non-leaf's None ``.grad``
read and a write through ``.data`` of a value a graph may need are handed to the full handlers (through the guard)
at once, and the rest of the iteration is traced in full; a numpy array taken from a cut of such a value is copied
and compared when the next backward starts; hook registrations go to the full handler; other in-place writes are
logged with their line, and a backward that raises is recorded after the fact, a stale-version error traced back
to the logged write.
"""

import math

import numpy as np

from ....autograd import observer as _observer
from ....autograd.observer import Observer, is_quiet
from ...frames import location_of, user_frame
from ...light_steps import LightSteps
from ...light_watch import WatchMemory
from ..numpy_values import scalar_root as _scalar
from ..numpy_values import storage_key as _storage
from .nan import data_line, nonfinite_culprit


class GradvizLight(LightSteps, Observer):
    """Light iterations for one ``GradvizAdapter``: ``on`` while the current iteration is light."""

    def __init__(self, adapter):
        super().__init__(adapter.builder, adapter.builder)
        self.adapter = adapter
        self.memory = WatchMemory()  # the cuts and in-place writes seen
        self.forward_calls = 0  # module calls since the last backward: a forward is in flight
        self._backward_args = None  # the light backward in progress: what its record needs if it raises
        self._accumulated = {}  # parameter key -> backward calls that added to its gradient (grad-accumulation)

    def module_call(self, module, inputs):
        self.note_call(module, tuple([getattr(a, "shape", None) for a in inputs or ()]))

    def note_roots(self, roots):
        for r in roots:
            self.note_root(getattr(r, "_grad_fn", None))

    # ----- switching: the guard off the engine, this observer on ---------------------------------------------
    def enter(self):
        _observer.detach(self.adapter.guard)
        _observer.attach(self)
        self.on = True

    def leave(self):
        self.on = False
        _observer.detach(self)
        if self.adapter.guard.active:
            _observer.attach(self.adapter.guard)

    # ----- the light observer -------------------------------------------------------------------------------------
    def callback_failed(self, callback, exc):
        """A callback here (or the adapter's full handler it passed the event to: called without the guard's
        frame while the trace's thread is alone) raised: recorded, as the guard records the adapter's errors."""
        self.builder.internal_error(callback, exc)

    def on_module_call(self, module, phase, inputs=None, output=None):
        if phase == "enter":
            self.forward_calls += 1
            self.adapter.training_watch.call(module)
            self.module_call(module, inputs)

    # ----- the watch -------------------------------------------------------------------------------------------
    def finding(self):
        with self.lock:
            self.builder.light_finding()

    def escalate(self):
        """The rest of this iteration is traced in full: the guard back on the engine now."""
        if self.on:
            self.leave()

    def on_variable(self, variable, origin):
        if variable._volatile and origin in ("new", "factory"):  # volatile-deprecated: named at its line
            self.finding()
            self.adapter.guard.on_variable(variable, origin)

    def on_hook(self, variable, hook, event, grad=None, result=None):
        """A tensor hook registered, called or removed: rare, and what a report says about a hook (the line that
        registered it) is read from these events, so they go to the full handler as they are."""
        if not is_quiet():
            with self.lock:
                self.builder.light_event()
            self.adapter.guard.on_hook(variable, hook, event, grad, result)

    def on_accumulate(self, variable, grad):
        key = id(variable)
        self._accumulated[key] = self._accumulated.get(key, 0) + 1

    def on_grad_write(self, variable, grad):
        self.summed.reset((id(variable),))

    def on_grad_read(self, variable, grad):
        if grad is None and variable._grad_fn is not None and not variable.retains_grad and not is_quiet():
            self.finding()
            self.adapter.guard.on_grad_read(variable, grad)

    def on_detach(self, source, result, how):
        if is_quiet():
            return
        if how in ("data", "detach") and source._requires_grad:
            self.memory.cut(source, result, how)
        elif how == "numpy" and self.memory.aliases:
            self._handed_out(source, result)

    def _handed_out(self, variable, array):
        """``variable.numpy()`` where ``variable`` is a cut of a value a graph may still need (a non-leaf's, or a
        leaf's while a forward is in flight): the array's bytes are copied and compared when the next backward
        starts (``_numpy_written``)."""
        found = self.memory.cut_source(variable, variable._base, None)
        if found is None or (found[0]._grad_fn is None and not self.forward_calls):
            return
        if isinstance(array, np.ndarray):
            self.memory.handout(found[0], variable, array, location_of(user_frame(3)), found[1])

    def _numpy_written(self):
        """A light backward is starting: the arrays handed out since the last one and written since are recorded
        as the full handlers record them (the cut, the hand-out, the nodes that saved that memory): backward is
        about to read the changed values (silent-inplace)."""
        changed = self.memory.changed_handouts()
        if not changed:
            return

        self.finding()
        adapter = self.adapter
        guard = adapter.guard
        builder = self.builder
        for source, variable, array, location, how in changed:
            guard.on_detach(source, variable, how)
            guard.on_detach(variable, array, "numpy")
            with self.lock:
                savers = builder.saved_storages.get(_storage(array)) or {}
                builder.light_numpy_write(id(variable), location, [rec.key for rec in list(savers.values())
                                                                   if rec.alive and not rec.freed],
                                          self.backward_location)
                adapter._name_from_frame(user_frame(3))  # (what the user's code calls the value)

    def on_inplace(self, variable, node, old_version, new_version):
        if is_quiet():
            return
        self.summed.reset_grad(variable)  # ``p.grad.zero_()``: a reset, if it is a stepped gradient
        memory = self.memory
        found = memory.cut_source(variable, variable._base) if memory.aliases else None
        source = None if found is None else found[0]
        if source is not None and (source._grad_fn is not None or self.forward_calls):
            # a write through ``.data`` of a value a graph may have saved: recorded in full from here
            self.finding()
            guard = self.adapter.guard
            guard.on_detach(source, variable, "data")
            guard.on_inplace(variable, node, old_version, new_version)
            self.escalate()
            return
        memory.wrote(variable, None if node is None else node.name(), old_version, new_version,
                     location_of(user_frame(2)))

    def _failed(self, roots, error):
        """A light backward raised: its record, after the write a stale-version error names, as the full handlers
        would have made them."""
        self.finding()
        adapter = self.adapter
        guard = adapter.guard
        if type(error).__name__ == "StaleVersionError":
            with self.lock:
                try:
                    self._stale_write(roots, error)
                except Exception as exc:
                    self.builder.internal_error("light stale write", exc)
        begin = self._backward_args
        if begin is not None:
            guard.on_backward_begin(*begin)
            guard.on_backward_end(roots, error)

    def _stale_write(self, roots, error):
        expected, current = getattr(error, "expected", None), getattr(error, "current", None)
        if expected is None or current is None:
            return
        adapter = self.adapter
        for r in roots:
            adapter.var_key(r)  # the graph, with each node's saved counters
        best = self.memory.stale_write(expected, current, lambda v: v._version)
        if best is None:
            return
        v = best.ref()
        savers = self.builder.saved_counters.get(id(v._vc)) or {}
        saved_by = [rec.id for rec in list(savers.values()) if rec.alive and not rec.freed]
        if saved_by:
            self.builder.watched_inplace(adapter.var_key(v), best.op, best.old, best.new, best.location, saved_by)

    def on_backward_begin(self, roots, grad_roots, retain_graph, inputs):
        self.adapter.training_watch.backward()
        self.forward_calls = 0
        self.backward_location = location_of(user_frame(2))
        if inputs is None:  # (not autograd.grad) how many backward calls per step, on what loss
            self.adapter.optimizer_watch.backward(self.backward_location,
                                                  roots[0]._grad_fn if len(roots) == 1 else None, _scalar(roots))
        self._backward_args = (roots, grad_roots, retain_graph, inputs)
        if self.memory.handouts:
            self._numpy_written()
        if self.builder.versions.silent_pending:  # a write through .data waits for this backward: trace it in full
            self.adapter.guard.on_backward_begin(roots, grad_roots, retain_graph, inputs)
            self.escalate()
            return
        self.note_roots(roots)
        estimate = self.builder.light.last_full_bytes if retain_graph else 0
        for r in roots:
            fn = getattr(r, "_grad_fn", None)
            if fn is not None and not self.watching(id(fn)):
                self.watch_graph(fn, id(fn), estimate)
            data = r._data
            if data.size == 1:
                value = float(data.reshape(()))
                bad = not math.isfinite(value)
            else:
                value = None
                bad = data.dtype.kind in "fc" and not np.isfinite(data).all()
            if bad:
                found = None if fn is None else nonfinite_culprit(fn)
                culprit = None if found is None else (found[0].name(), found[1])
                frame = user_frame(2)
                data = None if found is None else data_line(frame, found[2])
                self.nonfinite_root(value, frame, culprit, data)

    def on_backward_end(self, roots, error):
        if error is None:
            self.builder.light.backward_calls += 1
            self.backward_ended()
        elif not is_quiet():
            self._failed(roots, error)
        self._backward_args = None

    def on_optimizer(self, optimizer, event):
        self.adapter.optimizer_watch.event(optimizer, event)
        groups = getattr(optimizer, "param_groups", None)
        if event == "zero_grad":  # a reset the light step watch must know of (grad-accumulation)
            params = [p for g in groups for p in g.get("params", ())] if groups is not None else \
                list(optimizer.parameters())
            self.summed.reset([id(p) for p in params])
            return
        if event != "step":
            return
        stepped = []
        for group in groups or ():
            for p in group.get("params", ()):
                grad = getattr(p, "_grad", None)
                if grad is not None:  # (the engine adds into a kept gradient's array: counted, not versioned)
                    stepped.append((id(p), grad, self._accumulated.get(id(p), 0)))
                    if id(p) not in self.builder.live_variables:
                        with self.lock:
                            self.adapter.var_key(p)
        self.grads_stepped(optimizer, stepped, user_frame(2))
        names = self.adapter.names
        found = []
        for group in getattr(optimizer, "param_groups", ()):
            for p in group.get("params", ()):
                grad = getattr(p, "_grad", None)
                if grad is None:
                    continue
                g = grad._data.ravel()
                norm = math.sqrt(float(np.vdot(g, g).real))
                found.append((id(p), names.parameter_path(p) if names.param_names else None, norm))
        self.gradient_norms(found, lambda: user_frame(2))
        self.step_ended()
