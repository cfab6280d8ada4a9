"""gradviz's engine on light iterations (tracing/schedule.py): the per-op observer callbacks off.

On a light iteration the adapter's guard is detached from the engine and this small observer is attached in its
place: the engine's per-op, per-variable and per-backward-step callbacks reach only ``Observer``'s no-op methods.
What it watches: module calls (the iteration's signature), each backward's roots (NaN/Inf, and a weak reference to
each root's node: graphs alive), and each optimizer step (every parameter's gradient norm, and the iteration's end).
Only the context that attached the trace switches; threads keep the guard (full).
"""

import math

import numpy as np

from ...autograd import observer as _observer
from ...autograd.observer import Observer
from ..frames import user_frame
from ..light_steps import LightSteps


class GradvizLight(LightSteps, Observer):
    """Light iterations for one ``GradvizAdapter``: ``on`` while the current iteration is light."""

    def __init__(self, adapter):
        super().__init__(adapter.builder, adapter.builder)
        self.adapter = adapter

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
    def on_module_call(self, module, phase, inputs=None, output=None):
        if phase == "enter":
            self.adapter.training_watch.call(module)
            self.module_call(module, inputs)

    def on_backward_begin(self, roots, grad_roots, retain_graph, inputs):
        self.adapter.training_watch.backward()
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
                self.nonfinite_root(value, user_frame(2))

    def on_backward_end(self, roots, error):
        if error is None:
            self.backward_ended()

    def on_optimizer(self, optimizer, event):
        self.adapter.optimizer_watch.event(optimizer, event)
        if event != "step":
            return
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
