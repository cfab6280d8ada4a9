"""gradviz's engine on light iterations (tracing/schedule.py): the per-op observer callbacks off.

On a light iteration the adapter's guard is detached from the engine and this small observer is attached in its
place: the engine's per-op, per-variable and per-backward-step callbacks reach only ``Observer``'s no-op methods.
What it watches: module calls (the iteration's signature), each backward's roots (NaN/Inf, and a weak reference to
each root's node: graphs alive), and each optimizer step (every parameter's gradient norm, and the iteration's end).
Only the context that attached the trace switches; threads keep the guard (full).
"""

import math
import weakref

import numpy as np

from ...autograd import observer as _observer
from ...autograd.observer import Observer
from ..frames import location_at, user_frame


class _Ref(weakref.ref):
    __slots__ = ("key", "nbytes")


class GradvizLight(Observer):
    """Light iterations for one ``GradvizAdapter``: ``on`` while the current iteration is light."""

    def __init__(self, adapter):
        self.adapter = adapter
        self.builder = adapter.builder
        self.enabled = False  # whether the trace has a light schedule at all (set at attach)
        self.on = False
        self.calls = set()  # this iteration's (module, input shapes)
        self.count = 0
        self.roots = set()  # its backward roots' node classes
        self.has_optimizer = False
        self._by_backward = False
        self._graphs = {}  # id(root node) -> weak reference (its saved bytes estimate on it)

    # ----- the signature (light and full iterations) ---------------------------------------------------------------
    def module_call(self, module, inputs):
        self.count += 1
        shapes = tuple([getattr(a, "shape", None) for a in inputs or ()])
        self.calls.add((id(module), shapes))

    def note_roots(self, roots):
        for r in roots:
            fn = getattr(r, "_grad_fn", None)
            if fn is not None:
                self.roots.add(type(fn).__name__)

    def signature(self):
        """As on PyTorch (torch_light.py): modules and input shapes, the loss's node class, the call count's
        power of two."""
        sig = (frozenset(self.calls), frozenset(self.roots), self.count.bit_length())
        self.calls = set()
        self.roots = set()
        self.count = 0
        return sig

    # ----- iteration ends and switching -----------------------------------------------------------------------
    def backward_ended(self):
        if not self.has_optimizer:
            self._by_backward = True
            self.iteration_ended()

    def step_ended(self):
        self.has_optimizer = True
        if self._by_backward:
            self._by_backward = False
            return
        self.iteration_ended()

    def iteration_ended(self):
        with self.builder:
            full = self.builder.step_ended(self.signature(), self.on)
        if full and self.on:
            self.leave()
        elif not full and not self.on:
            self.enter()

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
            self.module_call(module, inputs)

    def on_backward_begin(self, roots, grad_roots, retain_graph, inputs):
        self.note_roots(roots)
        estimate = self.builder.light.last_full_bytes if retain_graph else 0
        for r in roots:
            fn = getattr(r, "_grad_fn", None)
            if fn is not None and id(fn) not in self._graphs:
                ref = _Ref(fn, self._graph_died)
                ref.key = id(fn)
                ref.nbytes = estimate
                self._graphs[id(fn)] = ref
                with self.builder:
                    self.builder.light_graph(estimate, True)
            data = r._data
            if data.size == 1:
                value = float(data.reshape(()))
                bad = not math.isfinite(value)
            else:
                value = None
                bad = data.dtype.kind in "fc" and not np.isfinite(data).all()
            if bad:
                frame = user_frame(2)
                with self.builder:
                    self.builder.light_loss(value, None if frame is None else
                                            location_at(frame.f_code, frame.f_lineno))

    def _graph_died(self, ref):
        if self._graphs.get(ref.key) is ref:
            del self._graphs[ref.key]
        with self.builder:
            self.builder.light_graph(ref.nbytes, False)

    def on_backward_end(self, roots, error):
        if error is None:
            self.backward_ended()

    def on_optimizer(self, optimizer, event):
        if event != "step":
            return
        names = self.adapter.names
        found = []
        bad = False
        for group in getattr(optimizer, "param_groups", ()):
            for p in group.get("params", ()):
                grad = getattr(p, "_grad", None)
                if grad is None:
                    continue
                g = grad._data.ravel()
                norm = math.sqrt(float(np.vdot(g, g).real))
                bad = bad or not math.isfinite(norm)
                found.append((id(p), names.parameter_path(p) if names.param_names else None, norm))
        location = None
        if bad:
            frame = user_frame(2)
            location = None if frame is None else location_at(frame.f_code, frame.f_lineno)
        with self.builder:
            self.builder.light_norms(found, location)
        self.step_ended()
