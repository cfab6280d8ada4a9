"""The torch adapter's light iterations (tracing/schedule.py): no per-op machinery, O(1) or O(parameters) a step.

On a light iteration the adapter's ``TorchFunctionMode`` is off the thread's stack (no op, ``.grad`` read, cut or
hook reaches it), no node is tagged and no prehook registered. What still runs:

- module calls, through a wrapper of ``nn.Module.__call__`` (the global module hooks are out of torch's tables,
  which keeps ``_call_impl``'s fast path): ``(module, input shapes)`` for the iteration's signature, the
  mode-dependent modules' runs, and whether a forward is in flight;
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
from .compat import _is_compiling
from .frames import user_frame
from .loss_shapes import broadcast_candidates, sightings
from .nan import data_line, nonfinite_culprit
from .patches import _forked
from .watch import TorchWatch, forget_imports

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
        self.broadcast_candidates = set()  # a torch without node shapes: those of the recorded losses (loss_shapes)
        self._taken = None  # while light: [(handle id, [(torch's table, what it held)])] of the global hooks out
        self._module_call = None  # while light: (Module.__call__ as it was, its light wrapper)
        self.exit_hook_out = False  # the exit hook is out too (no traced module call was open on this thread)

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

    # ----- module calls while light: Module.__call__ wrapped, no global module hook ---------------------------
    # Any global module hook sends every module call down ``nn.Module._call_impl``'s slow path (~5 us a call with
    # the adapter's pair, more than the signature's own bookkeeping): while light they are taken out of torch's
    # tables and one wrapper of ``Module.__call__`` notes the call before ``_call_impl``'s fast path runs.
    def _calls_light(self):
        """Take the adapter's global module hooks out (their ids kept, to be put back in their places) and wrap
        ``Module.__call__``. The exit hook stays while this thread is inside a traced module call (it closes it)."""
        adapter = self.adapter
        handles = adapter.handles[:2]
        if len(handles) < 2 or self._taken is not None:
            return
        taken = []
        for handle in handles:
            if handle is handles[1] and adapter.tls.calls:
                continue
            table = handle.hooks_dict_ref()
            if table is None or handle.id not in table:
                continue
            extras = [d for d in (ref() for ref in handle.extra_dict_ref) if d is not None and handle.id in d]
            taken.append((handle.id, [(d, d.pop(handle.id)) for d in [table] + extras]))
        self._taken = taken
        self.exit_hook_out = len(taken) == 2
        Module = self.torch.nn.Module
        original = Module.__dict__["__call__"]
        self._module_call = (original, _light_module_call(self, original))
        Module.__call__ = self._module_call[1]

    def _calls_full(self):
        """The global module hooks back where they were, ``Module.__call__`` as it was."""
        if self._taken is None:
            return
        taken, self._taken = self._taken, None
        self.exit_hook_out = False
        for key, entries in taken:
            for table, value in entries:
                _put_back(table, key, value)
        original, wrapper = self._module_call
        self._module_call = None
        Module = self.torch.nn.Module
        if Module.__dict__.get("__call__") is wrapper:  # (else someone patched it since: theirs stays)
            Module.__call__ = original

    def other_thread_call(self, original, module, args, kwargs):
        """A module call on another thread while this trace's thread is light: that thread stays full, so the
        full hooks' work runs around it (the exit's even when the call raises, as the exit hook's always_call)."""
        adapter = self.adapter
        exit_out = self.exit_hook_out
        adapter.module_enter(module, args)
        output = None
        try:
            output = original(module, *args, **kwargs)
            return output
        finally:
            if exit_out:  # (else the exit hook, still in torch's table, closes it)
                adapter.module_exit(module, args, output)

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
            self._calls_light()

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
        """Full again, or the trace detached (``adapter.attached`` is False by then: the import counter goes)."""
        self.watch.uninstall()
        if not self.adapter.attached:
            forget_imports()
        self.full_backward = False
        self._calls_full()
        if self._originals is not None:
            autograd = self.torch.autograd
            autograd.backward, autograd.grad = self._originals
            self._originals = None

    # ----- what a light iteration watches ---------------------------------------------------------------------
    def backward_begin(self, roots, retain_graph, create_graph):
        """Watch a light backward's roots; returns the user's frame that called it (or None)."""
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
        return frame

    def note_roots(self, roots):
        """The node classes of a backward's roots, for the signature (full iterations too); and the loss-shape
        mistakes near them, which the full iteration names (``loss_shapes``): known, not sighted again."""
        for r in roots:
            fn = tg.grad_fn_of(r)
            self.note_root(fn)
            if fn is not None:
                try:
                    self.loss_shapes_seen.update([key for _, key, _ in sightings(fn)])
                    if not self.adapter.compat.node_shapes:
                        self.broadcast_candidates.update(broadcast_candidates(fn))
                except Exception as exc:  # our bookkeeping, never the script's problem
                    self.adapter.internal_error("loss shapes", exc)

    def _loss_shapes(self, roots, frame):
        """A loss-shape mistake near a light backward's roots not seen on a full iteration: the next iterations
        are full (where the rule names its line), and the document says which iteration's line was not seen."""
        for r in roots:
            fn = tg.grad_fn_of(r) if isinstance(r, self.adapter._Tensor) else None
            if fn is not None and not self.adapter.compat.node_shapes:
                self._new_broadcast_candidate(fn, frame)
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

    def _new_broadcast_candidate(self, fn, frame):
        """On a torch whose nodes carry no output shapes (2.4), a light iteration cannot see a ``loss-broadcast``:
        when its loss has an elementwise node against a value needing no grad that no recorded iteration had
        (``loss_shapes.broadcast_candidates``), the next iterations are full (where the rule names the line, if
        the mistake stays), and the document says which iteration's loss was not looked at."""
        known = self.broadcast_candidates
        new = broadcast_candidates(fn) - known
        if not new:
            return
        known.update(new)
        iteration = self.builder.current_iteration()
        with self.lock:
            self.builder.light_finding()
            self.builder.unseen("not-recorded", f"the shapes in the loss of iteration {iteration}, where an "
                                "elementwise op meets a value needing no gradient as no recorded iteration's "
                                "loss does (a loss-broadcast there is not seen)",
                                how=f"torch {self.torch.__version__}: autograd nodes carry no output shapes "
                                    "(_input_metadata), which a light iteration reads near the loss",
                                location=None if frame is None else location_at(frame.f_code, frame.f_lineno),
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


def _light_module_call(light, original):
    """``nn.Module.__call__`` while light: the module's call noted for the iteration's signature (which module,
    on which input shapes), its mode-dependent runs (``training_watch``) and a forward in flight, then
    ``original``, whose ``_call_impl`` keeps its fast path. Another thread's call goes through the full hooks'
    work; a compiled region's (dynamo folds ``is_compiling``), a forked child's and a call after the trace went
    full again (a bound ``__call__`` kept from a light iteration) run as they are."""
    adapter = light.adapter
    # dynamo's flag alone (it folds it while tracing: our bookkeeping is never traced into a compiled graph); not
    # the fake-tensor check of the adapter's _is_compiling, which guards ops recorded into a graph: nothing here
    # runs an op, and a later stage's call of the compiled module on fake tensors only adds to the signature
    is_compiling = _is_compiling(adapter.torch)
    Tensor = adapter._Tensor
    modes = adapter.training_watch
    kinds = modes.kinds  # module class -> mode-dependent or recurrent (None: not classified yet)

    def __call__(module, *args, **kwargs):
        if is_compiling() or not light.on or _forked[0]:
            return original(module, *args, **kwargs)
        if _ident() != adapter.mode_thread:
            return light.other_thread_call(original, module, args, kwargs)
        try:
            if kinds.get(type(module), True):  # (most modules are neither: no call)
                modes.call(module)
            light.count += 1
            light.forward_calls += 1
            if len(args) == 1:  # (most calls: no list made)
                a = args[0]
                light.calls.add((id(module), (a.shape if isinstance(a, Tensor) else None,)))
            else:
                light.calls.add((id(module), tuple([a.shape if isinstance(a, Tensor) else None for a in args])))
        except Exception as exc:  # our bookkeeping, never the script's problem
            # (a compiler's later stage calling the module on fake tensors with symbolic, unhashable shapes, where
            # torch 2.4 leaves dynamo's flag off: not ours to record, as the fake-tensor check says)
            if not adapter._is_compiling():
                adapter.internal_error("module", exc)
        return original(module, *args, **kwargs)

    __call__.__wrapped__ = original
    __call__.__doc__ = original.__doc__
    __call__.__name__ = original.__name__
    __call__.__qualname__ = original.__qualname__
    return __call__


def _put_back(table, key, value):
    """Put a hook's entry back in torch's ordered table where its handle's id puts it: ids grow with each
    registration, so a table's order is its ids' (hooks registered while ours was out come after it)."""
    table[key] = value
    if any(k > key for k in table):
        items = sorted(table.items())
        table.clear()
        table.update(items)


_UNSEEN = object()


def _wrap(light, original, kind):
    """``torch.autograd.backward`` or ``grad`` while light: watch the roots, then run it unchanged. A backward the
    watch asked for (a write through ``.data`` waits for it) runs through the full handler instead, and one that
    raises is recorded after the fact (``TorchWatch.failed_backward``)."""
    def light_call(*args, **kwargs):
        if light.on and light.adapter.attached and not light.adapter._is_compiling():  # (AOTAutograd's grad)
            frame = _UNSEEN
            try:
                if kind == "backward":
                    roots = args[0] if args else kwargs.get("tensors")
                    retain = args[2] if len(args) > 2 else kwargs.get("retain_graph")
                    create = args[3] if len(args) > 3 else kwargs.get("create_graph", False)
                else:
                    roots = args[0] if args else kwargs.get("outputs")
                    retain = args[3] if len(args) > 3 else kwargs.get("retain_graph")
                    create = args[4] if len(args) > 4 else kwargs.get("create_graph", False)
                frame = light.backward_begin(roots, retain, create)
            except Exception as exc:  # our bookkeeping, never the script's problem
                light.adapter.internal_error("light backward", exc)
                roots = None
            light.forward_calls = 0
            if _ident() == light.adapter.mode_thread:
                light.adapter.tls.light_step = 0  # (a step that raised never reached its post hook)
                if frame is _UNSEEN:  # (backward_begin found it, unless it raised)
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
