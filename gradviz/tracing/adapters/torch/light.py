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
from threading import get_ident as _ident  # (called twice per module call while light: no import statement in it)

from ...frames import location_at
from ...light_steps import LightSteps
from . import graph as tg
from .frames import user_frame
from .loss_shapes import sightings
from .nan import data_line, nonfinite_culprit
from .patches import _forked
from .watch import TorchWatch

LIGHT_KEY = "gradviz_light"  # the tag in a light root's grad_fn.metadata


class _GraphTag:
    """Put in a light root's ``grad_fn.metadata``: it dies with the graph (the node's Python object may not)."""
    __slots__ = ("__weakref__",)


class TorchLight(LightSteps):
    """Light iterations for one ``TorchAdapter``: ``on`` while the current iteration is light."""

    def __init__(self, adapter):
        super().__init__(adapter.builder)
        self.adapter = adapter
        self.torch = adapter.torch
        self.pop_later = False  # went light inside the mode's own handler: the mode leaves at the next module call
        self._params = (None, None)  # (optimizer, [(parameter, key, name)]) of the last light step
        self._originals = None  # torch.autograd.backward / grad while wrapped
        self.watch = TorchWatch(self)  # the rare calls where mistakes happen, wrapped while light
        self.full_backward = False  # the watch asks for the next backward to be traced in full
        self.forward_calls = 0  # module calls since the last backward: a forward is in flight
        self.loss_shapes_seen = set()  # keys of loss-shape mistakes seen (loss_shapes.sightings)

    def finding(self):
        """The watch saw a mistake's call: the facts it records belong to this iteration; the next ones are full."""
        with self.lock:
            self.builder.light_finding()

    def escalate(self):
        """The rest of this iteration is recorded in full (what came before it stays as external nodes)."""
        if self.on and _ident() == self.adapter.mode_thread:
            self.leave()

    def module_call(self, module, inputs):
        Tensor = self.adapter._Tensor  # (a torch.Size is a tuple: hashed and compared as one)
        self.note_call(module, tuple([a.shape if isinstance(a, Tensor) else None for a in inputs]))

    # ----- the global module hooks while light: the signature only, on this thread -------------------------------
    def _light_enter(self, module, inputs):
        adapter = self.adapter
        if _ident() != adapter.mode_thread or _forked[0] or adapter._is_compiling():
            return adapter.module_enter(module, inputs)  # other threads stay full
        adapter.training_watch.call(module)
        self.count += 1
        self.forward_calls += 1
        Tensor = adapter._Tensor
        self.calls.add((id(module), tuple([a.shape if isinstance(a, Tensor) else None for a in inputs])))
        return None

    def _light_exit(self, module, inputs, output):
        if _ident() != self.adapter.mode_thread:
            return self.adapter.module_exit(module, inputs, output)
        return None

    def _swap_hooks(self, light):
        """Put the light handlers in the global module hooks' places (their order kept), or the full ones back.
        The exit hook is swapped only when this thread is inside no traced module call (none to close)."""
        adapter = self.adapter
        handles = adapter.handles[:2]
        if len(handles) < 2:
            return
        if light:
            hooks = (self._light_enter, None if adapter.tls.calls else self._light_exit)
        else:
            hooks = (adapter.module_enter, adapter.module_exit)
        for handle, hook in zip(handles, hooks):
            table = handle.hooks_dict_ref() if hasattr(handle, "hooks_dict_ref") else None
            if hook is not None and table is not None and handle.id in table:
                table[handle.id] = hook

    # ----- switching ------------------------------------------------------------------------------------------
    def enter(self):
        """Go light: the mode off this thread's stack, backward and autograd.grad wrapped."""
        from .patches import remove_mode

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
        self.watch.install()
        if not self.pop_later and mode is not None and adapter.mode_thread == _ident():
            self._swap_hooks(True)

    def leave(self):
        """Go full again: the mode back on this thread's stack, backward and grad as they were."""
        adapter = self.adapter
        if adapter.attached:  # nodes built on light iterations are reported as external, like those before attach
            from .patches import next_sequence_nr

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
        self.watch.uninstall()
        self.full_backward = False
        self._swap_hooks(False)
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
        adapter.training_watch.backward()
        keep = bool(create_graph) if retain_graph is None else bool(retain_graph)
        for r in roots:
            if not isinstance(r, Tensor):
                continue
            fn = tg.grad_fn_of(r)
            if fn is not None:
                self.note_root(fn)
                if LIGHT_KEY not in fn.metadata:
                    tag = fn.metadata[LIGHT_KEY] = _GraphTag()
                    self.watch_graph(tag, id(tag), self.builder.light.last_full_bytes if keep else 0)
            if r.numel() == 1:
                value = r.item()
                bad = not math.isfinite(value) if isinstance(value, float) else False
            else:
                value = None
                with torch.no_grad():
                    bad = r.is_floating_point() and not bool(torch.isfinite(r).all())
            if bad:
                found = None if fn is None else nonfinite_culprit(torch, fn)
                culprit = None if found is None else (tg.info(found[0]).name, found[1])
                frame = user_frame(0)
                data = None if found is None else data_line(frame, found[2])
                self.nonfinite_root(value, frame, culprit, data)
        # how many backward calls per step, on what loss and its value (accumulation-not-scaled, loss-diverging)
        frame = user_frame(0)
        self._loss_shapes(roots, frame)
        single = roots[0] if len(roots) == 1 and isinstance(roots[0], Tensor) else None
        adapter.optimizer_watch.backward(None if frame is None else location_at(frame.f_code, frame.f_lineno),
                                         None if single is None else tg.grad_fn_of(single),
                                         value if single is not None and isinstance(value, float) else None)

    def note_roots(self, roots):
        """The node classes of a backward's roots, for the signature (full iterations too); and the loss-shape
        mistakes near them, which the full iteration names (``loss_shapes``): known, not sighted again."""
        for r in roots:
            fn = tg.grad_fn_of(r)
            self.note_root(fn)
            if fn is not None:
                try:
                    self.loss_shapes_seen.update([key for _, key, _ in sightings(fn)])
                except Exception as exc:  # our bookkeeping, never the script's problem
                    self.adapter.internal_error("loss shapes", exc)

    def _loss_shapes(self, roots, frame):
        """A loss-shape mistake near a light backward's roots not seen on a full iteration: the next iterations
        are full (where the rule names its line), and the document says which iteration's line was not seen."""
        for r in roots:
            fn = tg.grad_fn_of(r) if isinstance(r, self.adapter._Tensor) else None
            for code, key, what in (() if fn is None else sightings(fn)):
                if key in self.loss_shapes_seen:
                    continue
                self.loss_shapes_seen.add(key)
                iteration = self.builder.current_iteration()
                location = None if frame is None else location_at(frame.f_code, frame.f_lineno)
                with self.lock:
                    self.builder.light_finding()
                    self.builder.unseen("not-recorded", f"the line of {what}, at iteration {iteration}",
                                        how=f"{code}: a light iteration records no op's line", location=location,
                                        advice=f"`--trace-steps {iteration}:{iteration}` (or `--full`) records that "
                                               "iteration and names the line")

    def freed(self, roots):
        """A non-retaining backward ran: the light graphs it went through hold no saved bytes any more."""
        Tensor = self.adapter._Tensor
        for r in (roots,) if isinstance(roots, Tensor) else roots:
            fn = tg.grad_fn_of(r) if isinstance(r, Tensor) else None
            tag = None if fn is None else fn.metadata.get(LIGHT_KEY)
            if tag is not None:
                self.graph_freed(id(tag))

    def step(self, optimizer):
        """A light optimizer step: every parameter's gradient norm (the iteration's end is the caller's)."""
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
        versions = []
        for p, key, name in params:
            g = p.grad
            if g is not None and g.layout == torch.strided:
                grads.append(g)
                found.append((key, name))
                versions.append((key, g, g._version))
        for p, key, _ in params:  # reported once, so a summed gradient can be named
            if key not in adapter.builder.live_variables:
                with self.lock:
                    adapter.var(p)
        self.grads_stepped(optimizer, versions, user_frame(0))
        if grads:
            norms = torch.stack(torch._foreach_norm(grads)).tolist()
            self.gradient_norms([(key, name, n) for (key, name), n in zip(found, norms)], lambda: user_frame(0))


def _wrap(light, original, kind):
    """``torch.autograd.backward`` or ``grad`` while light: watch the roots, then run it unchanged. A backward the
    watch asked for (a write through ``.data`` waits for it) runs through the full handler instead, and one that
    raises is recorded after the fact (``TorchWatch.failed_backward``)."""
    def light_call(*args, **kwargs):
        if light.on and light.adapter.attached and not light.adapter._is_compiling():  # (AOTAutograd's grad)
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
            light.forward_calls = 0
            if _ident() == light.adapter.mode_thread:
                light.adapter.tls.light_step = 0  # (a step that raised never reached its post hook)
                frame = user_frame(0)
                light.backward_location = None if frame is None else location_at(frame.f_code, frame.f_lineno)
                if light.watch.memory.handouts:
                    light.watch.numpy_written(frame, light.backward_location)
            if light.full_backward and _ident() == light.adapter.mode_thread:
                light.full_backward = False
                result = light.adapter.backward(original, args, kwargs, kind)
                if kind == "backward" and roots is not None and not (retain or create):
                    light.freed(roots)
                return result
            try:
                result = original(*args, **kwargs)
            except RuntimeError as exc:
                if _ident() == light.adapter.mode_thread:
                    light.watch.failed_backward(exc, args, kwargs, kind)
                raise
            light.builder.light.backward_calls += 1  # (one int, on the thread that runs it: no lock)
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
