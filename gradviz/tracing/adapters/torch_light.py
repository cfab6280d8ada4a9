"""The torch adapter's light iterations (tracing/schedule.py): no per-op machinery, O(1) or O(parameters) a step.

On a light iteration the adapter's ``TorchFunctionMode`` is off the thread's stack (no op, ``.grad`` read, cut or
hook reaches it), no node is tagged and no prehook registered. What still runs:

- the global module hooks, which only note ``(module, input shapes)`` for the iteration's signature;
- ``torch.autograd.backward`` / ``torch.autograd.grad``, wrapped while light: the roots' NaN/Inf (one host sync
  per scalar root) and a small tag in each root's ``grad_fn.metadata`` whose weak reference says when that graph
  died (graphs alive, not nodes: retained-graph growth);
- the optimizer step hook: every parameter's gradient norm in one ``torch._foreach_norm`` (exploding, vanishing,
  NaN/Inf gradients), and the end of the iteration.

At each iteration's end the builder says whether the next one is full; the mode is pushed back or popped then.
Only the thread that started the trace changes mode; other threads' modes stay as they are (full).
"""

import math
import weakref

from . import torch_graph as tg
from .torch_frames import user_frame

LIGHT_KEY = "gradviz_light"  # the tag in a light root's grad_fn.metadata


class _GraphTag:
    __slots__ = ("ref", "__weakref__")


class _TagRef(weakref.ref):
    __slots__ = ("nbytes",)


class TorchLight:
    """Light iterations for one ``TorchAdapter``: ``on`` while the current iteration is light."""

    def __init__(self, adapter):
        self.adapter = adapter
        self.torch = adapter.torch
        self.on = False
        self.enabled = False  # whether the trace has a light schedule at all (set at attach)
        self.calls = set()  # this iteration's (module, input shapes)
        self.count = 0  # and how many module calls it made
        self.roots = set()  # its backward roots' node classes
        self.has_optimizer = False
        self._by_backward = False  # the first backward ended an iteration before the first step was seen
        self.pop_later = False  # went light inside the mode's own handler: the mode leaves at the next module call
        self._last = self._last_calls = self._last_roots = None  # the last signature, and what it was made of
        self._params = (None, None)  # (optimizer, [(parameter, key, name)]) of the last light step
        self._originals = None  # torch.autograd.backward / grad while wrapped
        self._refs = set()  # weak references to light graphs' tags (kept so their callbacks run)

    # ----- the signature: cheap enough for every iteration --------------------------------------------------
    def module_call(self, module, inputs):
        self.count += 1
        Tensor = self.adapter._Tensor
        shapes = tuple([tuple(a.shape) if isinstance(a, Tensor) else None for a in inputs])
        self.calls.add((id(module), shapes))

    def signature(self):
        """The iteration's structure signature: which modules ran on which input shapes, the loss's node class,
        and the number of module calls to within a factor of two (a new episode length of the same policy is
        not a new structure each time; a tenfold longer one is). The last one is reused when equal (its hash is
        then cached)."""
        last = self._last
        if last is None or self.calls != self._last_calls or self.roots != self._last_roots or \
                self.count.bit_length() != last[2]:
            last = self._last = (frozenset(self.calls), frozenset(self.roots), self.count.bit_length())
            self._last_calls, self._last_roots = self.calls, self.roots
        self.calls = set()
        self.roots = set()
        self.count = 0
        return last

    # ----- switching ------------------------------------------------------------------------------------------
    def backward_ended(self):
        """A backward ended: the iteration's end while the loop has shown no optimizer."""
        if not self.has_optimizer:
            self._by_backward = True
            self.iteration_ended()

    def step_ended(self):
        """An optimizer step ended: the iteration's end (unless its backward ended it, before any step was seen)."""
        self.has_optimizer = True
        if self._by_backward:
            self._by_backward = False
            return
        self.iteration_ended()

    def iteration_ended(self):
        """Tell the builder an iteration ended; switch to what the next one is to be."""
        builder = self.adapter.builder
        signature = self.signature()
        with builder.lock:
            full = builder.step_ended(signature, self.on)
        if full and self.on:
            self.leave()
        elif not full and not self.on:
            self.enter()

    def enter(self):
        """Go light: the mode off this thread's stack, backward and autograd.grad wrapped."""
        from .torch_patches import remove_mode

        adapter = self.adapter
        with adapter.lock:
            adapter.checks.flush()
        mode = adapter.mode
        self.pop_later = False
        if mode is not None and adapter.mode_thread == _ident():
            from torch.overrides import _get_current_function_mode_stack

            if mode in _get_current_function_mode_stack():
                remove_mode(self.torch, mode)
            else:  # inside its own __torch_function__ (a backward): torch puts it back on return
                self.pop_later = True
        autograd = self.torch.autograd
        if self._originals is None:
            self._originals = (autograd.backward, autograd.grad)
            autograd.backward = _wrap(self, self._originals[0], "backward")
            autograd.grad = _wrap(self, self._originals[1], "grad")
        self.on = True

    def leave(self):
        """Go full again: the mode back on this thread's stack, backward and grad as they were."""
        adapter = self.adapter
        if adapter.attached:  # nodes built on light iterations are reported as external, like those before attach
            from .torch_patches import next_sequence_nr

            adapter._start_seq[_ident()] = next_sequence_nr(self.torch)  # (still light: the probe is not traced)
        self.on = False
        self.restore()
        if self.pop_later:  # it never left the stack
            self.pop_later = False
            return
        mode = adapter.mode
        if mode is not None and adapter.attached and adapter.mode_thread == _ident():
            from torch.overrides import _get_current_function_mode_stack

            if mode not in _get_current_function_mode_stack():
                self.torch._C._push_on_torch_function_stack(mode)

    def restore(self):
        if self._originals is not None:
            autograd = self.torch.autograd
            autograd.backward, autograd.grad = self._originals
            self._originals = None

    # ----- what a light iteration watches ---------------------------------------------------------------------
    def backward_begin(self, roots, retain_graph, create_graph):
        adapter = self.adapter
        torch = self.torch
        Tensor = adapter._Tensor
        if isinstance(roots, Tensor):
            roots = (roots,)
        builder = adapter.builder
        keep = bool(create_graph) if retain_graph is None else bool(retain_graph)
        for r in roots:
            if not isinstance(r, Tensor):
                continue
            fn = tg.grad_fn_of(r)
            if fn is not None:
                self.roots.add(type(fn).__name__)
                if LIGHT_KEY not in fn.metadata:
                    self._track(fn, builder.light.last_full_bytes if keep else 0)
            if r.numel() == 1:
                value = r.item()
                bad = not math.isfinite(value) if isinstance(value, float) else False
            else:
                value = None
                with torch.no_grad():
                    bad = r.is_floating_point() and not bool(torch.isfinite(r).all())
            if bad:
                frame = user_frame(0)
                from ..frames import location_at

                with adapter.lock:
                    builder.light_loss(value, None if frame is None else location_at(frame.f_code, frame.f_lineno))

    def note_roots(self, roots):
        """The node classes of a backward's roots, for the signature (full iterations too)."""
        for r in roots:
            fn = tg.grad_fn_of(r)
            if fn is not None:
                self.roots.add(type(fn).__name__)

    def _track(self, fn, nbytes):
        tag = _GraphTag()
        fn.metadata[LIGHT_KEY] = tag
        ref = tag.ref = _TagRef(tag, self._graph_died)
        ref.nbytes = nbytes
        self._refs.add(ref)
        builder = self.adapter.builder
        with builder.lock:
            builder.light_graph(nbytes, True)

    def _graph_died(self, ref):
        self._refs.discard(ref)
        builder = self.adapter.builder
        with builder.lock:
            builder.light_graph(ref.nbytes, False)

    def freed(self, roots):
        """A non-retaining backward ran: the light graphs it went through hold no saved bytes any more."""
        Tensor = self.adapter._Tensor
        builder = self.adapter.builder
        for r in (roots,) if isinstance(roots, Tensor) else roots:
            fn = tg.grad_fn_of(r) if isinstance(r, Tensor) else None
            tag = None if fn is None else fn.metadata.get(LIGHT_KEY)
            if tag is not None and tag.ref.nbytes:
                with builder.lock:
                    builder.light_freed(tag.ref.nbytes)
                tag.ref.nbytes = 0

    def step(self, optimizer):
        """A light optimizer step: every parameter's gradient norm, then the iteration's end."""
        adapter = self.adapter
        torch = self.torch
        known, params = self._params
        if known is not optimizer:  # the parameters, their keys and names, once per optimizer
            names = adapter.names
            params = [(p, id(p), names.parameter_path(p) if names.param_names else None)
                      for p in adapter._params_of(optimizer)]
            self._params = (optimizer, params)
        grads = []
        found = []
        for p, key, name in params:
            g = p.grad
            if g is not None and g.layout == torch.strided:
                grads.append(g)
                found.append((key, name))
        if grads:
            norms = torch.stack(torch._foreach_norm(grads)).tolist()
            found = [(key, name, n) for (key, name), n in zip(found, norms)]
            location = None
            total = sum(norms)
            if total - total != 0:  # some norm is NaN/Inf: where the step is
                from ..frames import location_at

                frame = user_frame(0)
                location = None if frame is None else location_at(frame.f_code, frame.f_lineno)
            builder = adapter.builder
            with builder.lock:
                builder.light_norms(found, location)


def _ident():
    import threading

    return threading.get_ident()


def _wrap(light, original, kind):
    """``torch.autograd.backward`` or ``grad`` while light: watch the roots, then run it unchanged."""
    def light_call(*args, **kwargs):
        if light.on and light.adapter.attached:
            try:
                if kind == "backward":
                    roots = args[0] if args else kwargs.get("tensors")
                    retain = args[2] if len(args) > 2 else kwargs.get("retain_graph")
                    create = args[3] if len(args) > 3 else kwargs.get("create_graph", False)
                else:
                    roots = args[0] if args else kwargs.get("outputs")
                    retain = args[3] if len(args) > 3 else kwargs.get("retain_graph")
                    create = args[4] if len(args) > 4 else kwargs.get("create_graph", False)
                light.backward_begin(roots, retain, create)
            except Exception as exc:  # our bookkeeping, never the script's problem
                light.adapter.internal_error("light backward", exc)
                roots = None
            result = original(*args, **kwargs)
            if kind == "backward" and light.on:
                try:
                    if roots is not None and not (retain or create):
                        light.freed(roots)
                    light.backward_ended()
                except Exception as exc:
                    light.adapter.internal_error("light backward", exc)
            return result
        return original(*args, **kwargs)

    light_call.__wrapped__ = original
    light_call.__doc__ = original.__doc__
    return light_call
