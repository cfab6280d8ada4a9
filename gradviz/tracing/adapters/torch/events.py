"""The torch adapter's handlers for everything but ops building nodes: in-place changes, tensors made from
nothing, cuts, hooks, ``.grad`` reads and writes, module calls, optimizer steps and backward calls.

A mixin of ``TorchAdapter`` (adapters/torch/engine.py), which owns identity (``var``, ``node_key``) and the builder.
Reads, writes and hook registrations made by torch's own code (an optimizer reading ``p.grad``) are not the
user's and are not reported, as on gradviz's engine.
"""

import sys
import threading
import warnings
import weakref

from ...frames import location_at, names_in_frame
from ..handouts import HandoutWatch
from ..skeleton import EventSkeleton
from . import graph as tg
from .cache_watch import cache_write
from .compat import STALE_DEFAULT, outside_functorch, stale_versions
from .frames import caller_is_internal, user_caller, user_frame
from .patches import _forked, forked, step_aside, step_back

_CUT_MEMORY = 256  # how many recent cuts (.data/.detach/.numpy) are remembered to spot re-wrapping
_NORM_BUDGET = 64 << 20  # bytes of received gradients held during a backward before their norms are taken
_SMALL_COPY = 4 << 20  # bytes of held outputs up to which the NaN/Inf check copies them into one tensor
_NEW = frozenset(("tensor", "as_tensor", "from_numpy", "asarray", "Tensor"))
_NOT_WEAK = frozenset((float, int, bool, complex, list))  # what .item() and .tolist() give: no weak reference
# the names of the callbacks' blocks (``Guarded``), as their failures are recorded: a plain dict, made up front
_GUARDED = ("backward", "cut", "grad_read", "grad_write", "hook", "numpy hand-out check", "numpy hand-out release",
            "optimizer")
_RECORDED = ("light step", "schedule")
_stale_pattern = [STALE_DEFAULT]  # reads the versions out of this torch's wording (torch_compat, set per adapter)


def _with_closure(adapter, optimizer, args, kwargs):
    """The step's ``(args, kwargs)`` with its closure wrapped, for the step pre hook to return; None without one.
    ``args`` begins with the optimizer itself (what torch's step wrapper hands its hooks)."""
    closure = kwargs.get("closure")
    if callable(closure) and type(closure) is not StepClosure:
        return args, dict(kwargs, closure=StepClosure(adapter, optimizer, closure))
    if len(args) > 1 and callable(args[1]) and type(args[1]) is not StepClosure:
        return (args[0], StepClosure(adapter, optimizer, args[1])) + tuple(args[2:]), kwargs
    return None


def _with_light_closure(tls, args, kwargs):
    """As ``_with_closure`` on a light iteration: the closure runs watched (``tls.light_step`` 0 while it runs)."""
    closure = kwargs.get("closure")
    if not callable(closure) and len(args) > 1 and callable(args[1]):
        closure = args[1]
    if not callable(closure) or isinstance(closure, (StepClosure, _LightClosure)):
        return None
    wrapped = _LightClosure(tls, closure)
    if kwargs.get("closure") is closure:
        return args, dict(kwargs, closure=wrapped)
    return (args[0], wrapped) + tuple(args[2:]), kwargs


class _LightClosure:
    __slots__ = ("tls", "closure")

    def __init__(self, tls, closure):
        self.tls = tls
        self.closure = closure

    def __call__(self, *args, **kwargs):
        tls = self.tls
        inside, tls.light_step = tls.light_step, 0
        try:
            return self.closure(*args, **kwargs)
        finally:
            tls.light_step = inside


class StepClosure:
    """The closure given to ``optimizer.step(closure)``, run observed (``TorchEvents.closure_call``)."""

    __slots__ = ("adapter", "optimizer", "closure", "__weakref__")

    def __init__(self, adapter, optimizer, closure):
        self.adapter = adapter
        self.optimizer = optimizer
        self.closure = closure

    def __call__(self, *args, **kwargs):
        return self.adapter.closure_call(self.optimizer, self.closure, args, kwargs)

    @property
    def __wrapped__(self):
        return self.closure


def _spans_on(savers, storage, raw, start):
    """``(node key, tag, span index, (raw bytes, first, end))`` of each live saved value on ``storage``."""
    for rec in list(savers.values()):
        tag = rec.handle() if rec.handle is not None and rec.alive and not rec.freed else None
        if tag is None or not tag.spans:
            continue
        for k, (where, lo, hi) in enumerate(tag.spans):
            if where == storage:
                yield rec.key, tag, k, (raw, lo - start, hi - start)


def _bytes_copy(where):
    raw, lo, hi = where
    return raw[lo:hi].clone()


def _on_stack(frame):
    """Whether ``frame`` is one of the calls in progress on this thread."""
    f = sys._getframe(2)
    while f is not None:
        if f is frame:
            return True
        f = f.f_back
    return False


def _here():
    """The user's frame and line: the first frame outside gradviz and torch, looking outwards from here."""
    frame = user_frame(0)
    return frame, (None if frame is None else location_at(frame.f_code, frame.f_lineno))


def _location(frame):
    """``_here()``'s line, of a user frame found already (``user_caller``)."""
    return None if frame is None else location_at(frame.f_code, frame.f_lineno)


class _KeyRef(weakref.ref):
    """A weak reference that knows the key of what it refers to."""

    __slots__ = ("key",)


class PerThread(threading.local):
    """What the adapter keeps per thread: its module calls, and whether it is inside a quiet section (an
    optimizer step, a compiled region), when ops are not the user's."""

    quiet = 0
    light_step = 0  # light optimizer steps in progress: their in-place updates are torch's, not the user's
    step = None
    aside = None  # the mode taken off this thread's stack during an optimizer step (torch_patches.step_aside)
    outside = 0  # ``quiet`` when the outermost step began: what a closure the step calls runs with
    step_depth = 0  # optimizer steps in progress (SAM's base optimizer steps inside SAM's step)
    step_frame = None  # the frame of the outermost step's call, to tell a step in progress from one that raised
    calls = None


class Guarded:
    """``with adapter.facts["cut"]:`` the builder's lock around a callback's facts and this thread quiet (as
    ``with adapter.lock``), and a failure of our own bookkeeping recorded as an internal error of that name
    instead of reaching the user's code. One object per name, made once: a callback pays what ``try`` around
    ``with adapter.lock`` cost (the two calls of a ``with``). Module calls, the hottest callbacks, take the lock
    inline instead (no call at all)."""

    __slots__ = ("adapter", "builder", "tls", "where")

    def __init__(self, adapter, where):
        self.adapter = adapter
        self.builder = adapter.builder
        self.tls = adapter.tls
        self.where = where

    def __enter__(self):
        self.builder.acquire()
        self.tls.quiet += 1

    def __exit__(self, kind, exc, tb):
        self.tls.quiet -= 1
        self.builder.release()
        if kind is None or not issubclass(kind, Exception):  # (a KeyboardInterrupt goes on)
            return False
        self.adapter.internal_error(self.where, exc)
        return True


class Recorded(Guarded):
    """``with adapter.failures["schedule"]:`` as ``Guarded`` without the lock: a failure of ours recorded."""

    __slots__ = ()

    def __enter__(self):
        pass

    def __exit__(self, kind, exc, tb):
        if kind is None or not issubclass(kind, Exception):
            return False
        self.adapter.internal_error(self.where, exc)
        return True


class TorchEvents(EventSkeleton):
    def __init__(self):
        self.value_type = self._Tensor
        self._cut = {}  # id(cut result) -> (weakref, id of the variable it belongs to, how)
        self._global_names = {}  # id(globals dict) -> (its size, names bound to tensors) at the last full pass
        # numpy arrays handed out on memory live nodes saved, compared when backward reaches the node (handouts.py);
        # each watched value is a byte range of its storage, its node's death (its tag's) ends its watch
        self.handouts = HandoutWatch(self.builder, _bytes_copy, self._bytes_same, self._tag_ref)
        self._watch = self.handouts.nodes  # (read by each node's prehook: empty, one truth test)
        self.backward_call = None  # the backward in progress (see Backward)
        self.mode = None
        self.handles = []
        # ``with self.facts["grad_read"]:`` the lock around a callback's facts, a failure of ours recorded;
        # ``self.failures[...]``: the same without the lock (``Guarded``, ``Recorded``)
        self.facts = {where: Guarded(self, where) for where in _GUARDED}
        self.failures = {where: Recorded(self, where) for where in _RECORDED}
        self._is_compiling = self.compat.is_compiling  # (torch/compat: the one dynamo folds while tracing)
        _stale_pattern[0] = self.compat.stale

    def observing(self):
        """Attached, in the process that attached (not a forked worker), and not inside dynamo's compilation."""
        return self.attached and not forked() and not self._is_compiling()

    # ----- forward side ----------------------------------------------------------------------------------------
    def created(self, func, args, outs):
        """A tensor made from nothing (a factory, ``torch.tensor``) by the user's code."""
        internal, frame = user_caller()
        if internal:
            return
        origin = "new" if getattr(func, "__name__", "") in _NEW else "factory"
        location = _location(frame)
        live = self.builder.live_variables
        for o in outs:
            if id(o) in live:
                continue
            self.new_var(o, origin, location)
            if origin == "new" and args and self._cut:
                cut = self._cut.get(id(args[0]))
                if cut is not None and cut[0]() is args[0]:
                    self.builder.wrapped(id(o), cut[1])

    def constructed(self, kind, args, t):
        """``Variable(...)`` or ``nn.Parameter(...)`` made ``t``, at the user's line (for a parameter made inside
        a module's ``__init__``, the line that made the module)."""
        if id(t) in self.builder.live_variables:
            return
        light = self.light_steps
        if light.on and kind == "Variable" and args:  # a graph cut on this light iteration, bridged by hand?
            light.watch.bridged(args[0], t)
            if light.on:
                return
        _, location = _here()
        self.new_var(t, "parameter" if kind == "Parameter" else "new", location)
        if kind == "Variable" and args and self._cut:
            cut = self._cut.get(id(args[0]))
            if cut is not None and cut[0]() is args[0]:
                self.builder.wrapped(id(t), cut[1])

    def unrecorded(self, func, tensors, outs, location):
        """An op that built no node although an input requires grad (``no_grad``, a non-differentiable op)."""
        in_keys = [self.var(t) for t in tensors]
        live = self.builder.live_variables
        facts = [self.output(o, True) for o in outs if id(o) not in live]
        if facts:
            self.builder.unrecorded_op(getattr(func, "__name__", str(func)), in_keys, facts, location,
                                       grad_mode=self.torch.is_grad_enabled())

    def inplace(self, func, t, old_version, location, args=(), internal=False):
        """An in-place write of ``t`` (``old_version`` before it). ``internal``: made by torch's own Python code,
        not the user's (gradcheck perturbing its inputs through ``.data``): never a silent write of the user's."""
        key = self.var(t)
        fn = tg.grad_fn_of(t)
        node = None if fn is None else self.node_key(fn, location)
        base = t._base
        base_key = base_node = None
        base_fn = None if base is None or node is None else tg.grad_fn_of(base)
        if base_fn is not None:
            base_key = self.var(base)
            base_node = self.node_key(base_fn, location)
        skey = tg.storage_key(t)[0]
        from_data = self._from_data(t)
        storage = None
        saved = self.builder.saved_storages
        if saved and skey in saved and not internal and self._silent_write(t, skey, from_data, func, args):
            storage = skey
            from_data = True
        # a version counter of its own (.data, a tensor made on the same memory): PyTorch will not notice, not a
        # stale-version case
        counter = None if from_data else skey
        op = tg.info(fn).name if fn is not None and node is not None and fn.metadata.get(tg.KEY).id == node \
            else _node_name_of(func)
        self.builder.inplace(key, old_version, t._version, counter, location, node=node, op=op, base=base_key,
                             base_node=base_node, storage=storage)
        if not internal:  # (a view of a cached tensor written again, or stored back by ``t[i] += v``)
            name = getattr(func, "__name__", None)
            cache_write(self.builder, t, name, location, args[2] if name == "__setitem__" and len(args) > 2 else None)

    def _silent_write(self, t, skey, from_data, func, args):
        """Whether writing ``t`` (on storage ``skey``) changed a value a live node saved without moving that
        value's version counter. A saved value counts when the written elements overlap it; its counter is
        told apart by a tensor sharing it (the argument or output it was): after the write that tensor's
        ``_version`` differs from ``t``'s (one counter reads the same for all who share it); ``.data`` always
        has its own. A write that also moved a saved value's counter is a tracked one (stale-version): then
        nothing is reported as silent."""
        first, end = tg.span(_written(t, func, args))
        version = t._version
        silent = False
        for rec in list(self.builder.saved_storages[skey].values()):
            if not rec.alive or rec.freed or rec.handle is None:
                continue
            tag = rec.handle()
            for k, (storage, lo, hi) in enumerate((tag.spans or ()) if tag is not None else ()):
                if storage != skey or hi <= first or end <= lo:
                    continue
                holder = None if from_data else self._counter_holder(rec, k, lo)
                if from_data or (holder is not None and holder._version != version):
                    silent = True
                else:
                    return False
        return silent

    def _nonfinite_from_data(self, first, roots, frame):
        """This iteration's first NaN/Inf came before the backward that meets it: if its graph says it came in with
        the data (as a light iteration reads it, ``torch/nan``), the line that made that input is named."""
        from .nan import data_line, nonfinite_culprit

        if self.nonfinite_looked is first:
            return
        self.nonfinite_looked = first  # (once: the walk reads every saved tensor of the graph)
        for r in roots:
            fn = tg.grad_fn_of(r)
            found = None if fn is None else nonfinite_culprit(self.torch, fn)
            if found is not None:
                origin = data_line(frame, found[2]) if found[1] == "input" else None
                if origin is not None:
                    self.builder.nonfinite_data(*origin, op=tg.info(found[0]).name)
                return

    def _from_data(self, t):
        for x in (t, t._base):
            if x is not None:
                cut = self._cut.get(id(x))
                if cut is not None and cut[2] == "data" and cut[0]() is x:
                    return True
        return False

    # ----- cuts, hooks, .grad -------------------------------------------------------------------------------
    def cut(self, func, args, kwargs, how):
        result = func(*args, **kwargs)
        if not self.attached:
            return result
        internal, frame = user_caller(func)  # func: Tensor.__array__ is Python code of torch's
        if internal:
            return result
        with self.facts["cut"]:
            source = args[0]
            location = _location(frame)
            skey = self.var(source)
            rkey = None
            if isinstance(result, self._Tensor):
                if result is source:
                    rkey = skey
                else:
                    self.new_var(result, how, location)
                    rkey = id(result)
            owner = self.builder.cut(skey, how, location, result=rkey)
            self._remember_cut(result, owner, how)
            if how == "numpy" and self.builder.saved_storages:
                self._watch_handout(skey, source, location)
        return result

    def _counter_holder(self, rec, k, first):
        """A live tensor sharing the version counter of node ``rec``'s ``k``-th saved tensor (which starts at
        byte ``first``): the argument it was, or for a saved result the output on that memory; else None."""
        variables = self.builder.variables
        saved = rec.saved
        if k >= len(saved):
            return None
        vid, kind = saved[k][0], saved[k][1]
        candidates = (vid,) if kind == "input" else tuple(rec.outputs or ()) + tuple(rec.input_variables or ())
        for vid in candidates:
            vrec = variables.get(vid)
            ref = None if vrec is None else vrec.handle
            t = ref() if isinstance(ref, weakref.ref) else None
            if t is not None and (kind == "input" or t.data_ptr() == first):
                return t
        return None

    # ----- numpy arrays on saved memory: a write into one is seen by no torch call ---------------------------
    def _watch_handout(self, skey, source, location):
        """``source.numpy()`` handed out memory that live nodes saved: watch the bytes of each saved value on it."""
        storage = tg.storage_key(source)[0]
        savers = self.builder.saved_storages.get(storage)
        if not savers:
            return
        raw = self.torch.empty(0, dtype=self.torch.uint8, device=source.device).set_(source.untyped_storage())
        start = source.untyped_storage().data_ptr()
        self.handouts.hand_out(skey, storage, location, _spans_on(savers, storage, raw, start))

    def _bytes_same(self, copy, where):
        raw, lo, hi = where
        return self.torch.equal(copy, raw[lo:hi])

    def _tag_ref(self, tag, key):
        ref = _KeyRef(tag, self._watched_node_died)
        ref.key = key
        return ref

    def _watched_node_died(self, ref):
        """A node with watched values died without running backward: drop its copies and the storage views."""
        with self.facts["numpy hand-out release"]:
            if self.handouts.refs.get(ref.key) is ref:
                self.handouts.drop(ref.key)

    def check_watched(self, key):
        """Backward reached node ``key`` (its prehook): report the saved values changed since their hand-out."""
        with self.facts["numpy hand-out check"]:  # inside PyTorch's backward: never the script's problem
            self.handouts.reached(key)

    def _remember_cut(self, value, owner, how):
        if type(value) in _NOT_WEAK:  # .item() / .tolist(): no raise-and-catch per training step
            return
        try:
            ref = weakref.ref(value)
        except TypeError:  # a Python number: nothing can wrap its memory
            return
        self._cut[id(value)] = (ref, owner, how)
        if len(self._cut) > _CUT_MEMORY:
            del self._cut[next(iter(self._cut))]

    def grad_get(self, func, args, kwargs):
        t = args[0]
        if not self.attached:
            return func(*args, **kwargs)
        internal, frame = user_caller()
        if internal:
            return func(*args, **kwargs)
        if t.is_leaf or t.retains_grad:
            grad = func(*args, **kwargs)
        else:  # PyTorch warns here; under a mode the warning would point at our line: re-issue it at the user's
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                grad = func(*args, **kwargs)
            _reissue(caught, frame)
        with self.facts["grad_read"]:
            location = None if frame is None else location_at(frame.f_code, frame.f_lineno)
            key = self.var(t)
            name = None
            if frame is not None and self.builder.live_variables[key].name is None:
                name = names_in_frame(frame, self._Tensor).get(key)
            self.builder.grad_read(key, location, was_none=grad is None, is_leaf=bool(t.is_leaf),
                                   retains_grad=bool(t.retains_grad), requires_grad=bool(t.requires_grad),
                                   name=name)
        return grad

    def grad_set(self, func, args, kwargs):
        result = func(*args, **kwargs)
        if not self.attached:
            return result
        internal, frame = user_caller()
        if internal:
            return result
        with self.facts["grad_write"]:
            location = _location(frame)
            self.builder.grad_write(self.var(args[0]), location, is_none=args[1] is None)
        return result

    def hook_register(self, func, args, kwargs, retain_grad):
        if not self.attached or caller_is_internal(func):
            return func(*args, **kwargs)
        t = args[0]
        hook = None
        if not retain_grad:
            hook = args[1] if len(args) > 1 else kwargs.pop("hook", None)
            args = (t, _HookCall(self, t, hook)) + tuple(args[2:])
        result = func(*args, **kwargs)
        with self.facts["hook"]:
            _, location = _here()
            self.hook_fact(self.var(t), "register", location, hook, retain_grad=retain_grad)
        return result

    def hook_called(self, t, hook):
        if not self.attached:
            return
        with self.facts["hook"]:
            call = self.backward_call
            key = id(t)
            if key in self.builder.live_variables:
                where = self.light_steps.backward_location if call is None else call.location  # (a light one)
                self.hook_fact(key, "call", where, hook)

    # ----- modules and optimizers ---------------------------------------------------------------------------
    def _calls(self):
        calls = self.tls.calls
        if calls is None:
            calls = self.tls.calls = []
        return calls

    # module_enter / module_exit run for every module call: ``observing()`` and ``with self.lock`` inline
    def module_enter(self, module, inputs):
        if not self.attached or _forked[0] or self._is_compiling():
            return None
        self.training_watch.call(module)  # train/eval mode facts (torch_training), full or light
        light = self.light_steps
        if light.enabled:
            try:
                if light.pop_later:
                    light.enter()
                light.module_call(module, inputs)  # the iteration's signature (torch/light), light or full
            except Exception as exc:
                self.internal_error("module", exc)
            if light.on:
                return None
        builder, tls = self.builder, self.tls
        if tls.step is not None and not _on_stack(tls.step_frame):
            self._abandon_step()  # the module call after a step that raised: the user's code again
        try:
            builder.acquire()
            tls.quiet += 1
            try:
                calls = tls.calls
                if calls is None:
                    calls = tls.calls = []
                parent, parent_path = calls[-1] if calls else (None, None)
                path = self.names.path(module, parent, parent_path, user_frame)
                calls.append((module, path))
                if parent is None and inputs and self.backward_call is None:  # (not a checkpoint's recompute)
                    self._name_inputs(inputs, path)
                builder.module_enter(id(module), path, type(module).__name__)
                found = self.names.take_new_parameters()
                if found:
                    builder.parameter_names({id(p): path for p, path in found.values()})
            finally:
                tls.quiet -= 1
                builder.release()
        except Exception as exc:
            self.internal_error("module", exc)
        return None

    def module_exit(self, module, inputs, output):
        if not self.attached or _forked[0] or self._is_compiling() or (self.light_steps.on and not self.tls.calls):
            return None
        builder, tls = self.builder, self.tls
        try:
            builder.acquire()
            tls.quiet += 1
            try:
                calls = tls.calls
                if calls is None:
                    calls = tls.calls = []
                for i in range(len(calls) - 1, -1, -1):
                    if calls[i][0] is module:
                        del calls[i:]
                        break
                builder.module_exit(id(module))
            finally:
                tls.quiet -= 1
                builder.release()
        except Exception as exc:
            self.internal_error("module", exc)
        return None

    def _params_of(self, optimizer):
        params = []
        for group in getattr(optimizer, "param_groups", ()):
            params.extend([p for p in group.get("params", ()) if isinstance(p, self._Tensor)])
        return params

    def step_begin(self, optimizer, args, kwargs):
        """An optimizer's step starts: torch's own code from here to ``step_end`` (quiet, the mode aside), except
        the closure it was given (``step(closure)``), which is the user's: returned wrapped (``StepClosure``)."""
        self.optimizer_watch.step(optimizer)  # the order of backward, zero_grad, step (optimizer_watch)
        if not self.observing():
            return None
        if self.light_steps.on:  # the light watch looks away until step_end, but for the closure (the user's)
            self.tls.light_step += 1
            return _with_light_closure(self.tls, args, kwargs)
        tls = self.tls
        with self.lock:
            params = [(p, p._version) for p in self._params_of(optimizer)]
        if tls.step is not None and not _on_stack(tls.step_frame):
            self._abandon_step()  # a step that raised outside its closure never reached step_end
        if tls.step is None:  # the outermost step
            tls.outside = tls.quiet
            tls.quiet += 1  # its own ops are the update, reported at the end
            tls.aside = step_aside(self)
            tls.step, tls.step_depth = params, 1
            tls.step_frame = sys._getframe(1)  # torch's step wrapper, calling its pre hooks: this step's call
        else:  # a step inside a step (SAM's base optimizer): part of the outer one, its parameters watched too
            tls.step_depth += 1
            seen = {id(p) for p, _ in tls.step}
            tls.step.extend([entry for entry in params if id(entry[0]) not in seen])
        return _with_closure(self, optimizer, args, kwargs)

    def step_end(self, optimizer, args, kwargs):
        tls = self.tls
        before = tls.step
        light = self.light_steps
        if before is None:
            if tls.light_step:
                tls.light_step -= 1
            if light.on and self.observing():  # a light step: gradient norms, then the iteration's end
                with self.failures["light step"]:
                    light.step(optimizer)
                    light.step_ended()
            return
        tls.step_depth -= 1
        if tls.step_depth:  # an inner step: the outer step reports
            return
        tls.step = tls.step_frame = None
        tls.quiet -= 1
        aside, tls.aside = tls.aside, None
        try:
            self._step_end(optimizer, before)
        finally:
            step_back(self, aside)
        if light.enabled and self.observing() and tls.quiet == 0:
            with self.failures["schedule"]:
                self.iteration_step()

    def _abandon_step(self):
        """The thread as before a step that never ended: observed again, its mode back on the stack."""
        tls = self.tls
        tls.step = tls.step_frame = None
        tls.step_depth, tls.quiet = 0, tls.outside
        aside, tls.aside = tls.aside, None
        step_back(self, aside)

    def _step_end(self, optimizer, before):
        if not self.observing():
            return
        with self.facts["optimizer"]:
            _, location = _here()
            keys = self._parameter_updates(before, location, type(optimizer).__name__)
            self.optimizer_event("step", location, optimizer, keys)

    def _parameter_updates(self, before, location, name):
        """Report the parameters whose version moved since ``before`` was taken; their keys."""
        keys = []
        for p, version in before:
            key = self.var(p)
            keys.append(key)
            if p._version != version:
                self.builder.parameter_update(key, version, p._version, tg.storage_key(p)[0], location, name)
        return keys

    def closure_call(self, optimizer, closure, args, kwargs):
        """``closure`` called by ``optimizer``'s step: the user's forward, backward and ``.grad`` reads, observed
        as outside any step. What the step wrote into the parameters before this call (LBFGS's line search, SAM's
        perturbation) is reported first, at the step's line: a graph still alive that saved them is stale."""
        tls = self.tls
        if tls.step is None or not self.observing():
            return closure(*args, **kwargs)
        with self.facts["optimizer"]:
            _, location = _here()
            self._parameter_updates(tls.step, location, type(optimizer).__name__)
            tls.step = [(p, p._version) for p, _ in tls.step]
        # the thread as before the step while the closure runs (a step the closure makes is a step of its own)
        inside = tls.step, tls.step_depth, tls.quiet, tls.outside, tls.step_frame
        tls.step, tls.step_depth, tls.quiet, tls.step_frame = None, 0, tls.outside, None
        aside, tls.aside = tls.aside, None
        step_back(self, aside)
        # a closure that raises ends the step there (its post hook never runs): the thread stays as it is now
        result = closure(*args, **kwargs)
        tls.step, tls.step_depth, tls.quiet, tls.outside, tls.step_frame = inside
        tls.aside = None if aside is None else step_aside(self)
        with self.lock:
            tls.step = [(p, p._version) for p, _ in tls.step]
        return result

    def zero_grad_called(self, owner):
        if not self.observing() or self.light_steps.on:
            return
        tls = self.tls
        if tls.step is not None and not _on_stack(tls.step_frame):
            self._abandon_step()  # the zero_grad after a step that raised: the user's code again
        with self.facts["optimizer"]:
            _, location = _here()
            if isinstance(owner, self.torch.nn.Module):
                params = list(owner.parameters())
            else:
                params = self._params_of(owner)
            self.optimizer_event("zero_grad", location, owner, [self.var(p) for p in params])

    # ----- backward -------------------------------------------------------------------------------------------
    def backward(self, func, args, kwargs, kind):
        """``Tensor.backward`` (``kind="method"``), ``torch.autograd.backward`` or ``torch.autograd.grad``."""
        if not self.attached:
            return func(*args, **kwargs)
        call = None
        with self.facts["backward"]:
            call = self._backward_begin(args, kwargs, kind)
        if call is None:  # (our own failure, recorded: the user's backward runs unobserved)
            return func(*args, **kwargs)
        error = None
        try:
            return func(*args, **kwargs)
        except BaseException as exc:
            error = exc
            raise
        finally:
            with self.facts["backward"]:
                self._backward_end(call, error)
            if kind != "grad" and error is None and not self.tls.quiet:
                with self.failures["schedule"]:
                    self.iteration_backward()

    def _backward_begin(self, args, kwargs, kind):
        Tensor = self._Tensor
        if kind == "grad":
            names = ("outputs", "inputs", "grad_outputs", "retain_graph", "create_graph")
            roots_name, grads_name = "outputs", "grad_outputs"
        else:
            names = ("tensors", "grad_tensors", "retain_graph", "create_graph", "inputs")
            roots_name, grads_name = "tensors", "grad_tensors"
        bound = dict(zip(names, args))
        bound.update({k: v for k, v in kwargs.items() if k in names})
        if "gradient" in kwargs:  # Tensor.backward's name for it
            bound["grad_tensors"] = kwargs["gradient"]
        roots = bound.get(roots_name)
        roots = [roots] if isinstance(roots, Tensor) else [r for r in (roots or ()) if isinstance(r, Tensor)]
        grads = bound.get(grads_name)
        grads = [grads] if grads is None or isinstance(grads, Tensor) else list(grads)
        retain = bound.get("retain_graph")
        keep = bool(bound.get("create_graph")) if retain is None else bool(retain)
        frame, location = _here()
        self._name_from_frame(frame, quick=True)
        single = kind != "grad" and len(roots) == 1
        # a NaN made in forward is reported before the backward that meets it; the loss read in the same transfer
        loss = self.checks.flush(roots[0] if single and _is_loss(roots[0]) else None)
        first = self.builder.first_nonfinite
        if first is not None and first["phase"] == "forward" and first["iteration"] == self.builder.groups.iteration:
            self._nonfinite_from_data(first, roots, frame)
        keys = [self.var(r) for r in roots]
        root_fns = [tg.grad_fn_of(r) for r in roots]
        root_nodes = [None if fn is None else self.node_key(fn, None) for fn in root_fns]
        # refused before it starts: a non-scalar root without a gradient, or a root with no graph at all
        starts = all(fn is not None or r.requires_grad for fn, r in zip(root_fns, roots)) and \
            all(r.numel() == 1 or (i < len(grads) and grads[i] is not None) for i, r in enumerate(roots))
        self.backward_started(roots, keys, root_nodes, location, kind="grad" if kind == "grad" else "backward",
                              retain_graph=keep if starts else None, gradient_none=any(g is None for g in grads),
                              root_fn=root_fns[0] if single else None,
                              loss=loss)
        call = self.backward_call = Backward(location, keep, keys, self.torch)
        return call

    def _backward_end(self, call, error):
        if call is None:
            return
        self.backward_call = None
        b = self.builder
        live_vars, live_nodes = b.live_variables, b.live_nodes
        for key, leaf_ref, norm in call.steps():
            finite = norm is None or norm - norm == 0  # None: not measured (a SendRpcBackward, torch_rpc)
            if leaf_ref is None:
                if key in live_nodes:
                    b.backward_step(key, norm, nonfinite=not finite)
                continue
            if key not in live_vars:
                continue
            leaf = leaf_ref()
            grad = None if leaf is None else leaf.grad
            gkey = None
            if grad is not None and id(grad) not in live_vars:
                gkey = id(grad)
                self.new_var(grad, "grad", call.location)
            b.accumulate(key, norm, nonfinite=not finite, grad=gkey)
        if not call.keep:
            for key in call.nodes:
                b.buffers_freed(key)
        self.backward_finished(None if error is None else _error(error, call))

    # ----- names ------------------------------------------------------------------------------------------------
    def _name_inputs(self, inputs, path):
        """Name the data a module the user's code called is given (its tensors made by no op): the Python name
        the calling code binds it to, else ``input of model`` (the forward view starts there)."""
        Tensor = self._Tensor
        tensors = [t for t in inputs if isinstance(t, Tensor)]
        live = self.builder.live_variables
        unnamed = []
        for t in tensors:
            rec = live.get(id(t))
            if rec is None or (rec.name is None and rec.origin != "op"):
                unnamed.append(t)
        if not unnamed:
            return
        bound = names_in_frame(user_frame(2), Tensor)
        names = {}
        for number, t in enumerate(tensors):
            if any(t is u for u in unnamed):
                names[self.var(t)] = bound.get(id(t)) or (
                    f"input {number} of {path}" if len(tensors) > 1 else f"input of {path}")
        self.builder.name_variables(names)


class Backward:
    """One backward call in progress: the nodes it runs, in order, with the gradients they received. Norms are
    taken in batches (``norms``) when the held gradients pass a budget and at the end: no norm call and no host
    sync per node."""

    __slots__ = ("location", "keep", "roots", "torch", "nodes", "_order", "_grads", "_norms", "_held")

    def __init__(self, location, keep, roots, torch):
        self.location = location
        self.keep = keep
        self.roots = roots
        self.torch = torch
        self.nodes = []  # keys of the op nodes run, in order
        self._order = []  # (key, leaf weakref or None, index of its norm or -1)
        self._grads = []
        self._norms = []
        self._held = 0

    def visit(self, key, grad_outputs, leaf):
        index = -1
        g = grad_outputs[0] if len(grad_outputs) == 1 else None
        if g is None:
            found = [x for x in grad_outputs if x is not None]
            if len(found) == 1:
                g = found[0]
            elif found:
                g = self.torch.cat([x.reshape(-1) for x in found])
        if g is not None:
            grads = self._grads
            index = len(self._norms) + len(grads)
            grads.append(g)
            self._held += g.nbytes
            if self._held > _NORM_BUDGET:
                self._flush()
        self._order.append((key, leaf, index))
        if leaf is None:
            self.nodes.append(key)

    def _flush(self):
        if self._grads:
            try:
                self._norms.extend(norms(self.torch, self._grads))
            except RuntimeError:  # torch.func's wrapped gradients, unreadable on some torch lines (torch/compat)
                self._norms.extend(outside_functorch(self.torch, norms, self._grads))
            self._grads = []
            self._held = 0

    def steps(self):
        """``(key, leaf weakref or None, norm)`` in the order backward ran them."""
        self._flush()
        values = self._norms  # floats
        self._norms = []
        return [(key, leaf, 0.0 if index < 0 else values[index]) for key, leaf, index in self._order]


_SMALL = 4096  # elements: many tensors of one shape up to this size are normed together, stacked
_STACKED = 16  # how many tensors of one small shape make stacking them pay
# how many tensors make it worth trying them all in one stack / concatenation first: a refusal (shapes differ)
# costs about 15 us, a per-tensor look about 0.4 us
_ATTEMPT = 64


def norms(torch, tensors):
    """L2 norms of ``tensors`` as Python floats, in order, with few kernel calls and one transfer per device (no
    host sync per tensor). Many small tensors of one shape (a long elementwise chain's gradients) are stacked and
    normed in one call; the rest go to one ``_foreach_norm`` call, a big one once per block of memory (a weight's
    gradient reaches ``TBackward`` and the weight's accumulator as two views of one buffer)."""
    if len(tensors) >= _ATTEMPT and tensors[0].numel() <= _SMALL:
        found = _stacked_norms(torch, tensors)
        if found is not None:
            return found
    values = [None] * len(tensors)
    groups = {}  # (shape, dtype, device) -> indices of the small tensors of that kind
    alone = {}  # (address, numel, dtype, device) of a dense tensor, or (index,) -> its indices
    for i, t in enumerate(tensors):
        n = t.numel()
        if n <= _SMALL:
            kind = (t.shape, t.dtype, "cpu" if t.is_cpu else t.device)  # (t.device builds an object)
            found = groups.get(kind)
            if found is None:
                groups[kind] = [i]
            else:
                found.append(i)
            continue
        kind = (t.data_ptr(), n, t.dtype, "cpu" if t.is_cpu else t.device) if _dense(t) else (i,)
        found = alone.get(kind)
        if found is None:
            alone[kind] = [i]
        else:
            found.append(i)
    parts = []  # (indices per value, 1-d tensor of values)
    for (shape, _, _), indices in groups.items():
        if len(indices) < _STACKED or not shape:
            for i in indices:
                alone[(i,)] = [i]
            continue
        stacked = torch.stack([_floating(tensors[i]) for i in indices]).flatten(1)
        parts.append(([[i] for i in indices], torch.linalg.vector_norm(stacked, dim=1)))
    if alone:
        shared = list(alone.values())
        singles = [_floating(tensors[indices[0]]) for indices in shared]
        try:
            found = list(torch._foreach_norm(singles))
        except (RuntimeError, TypeError):  # mixed layouts or dtypes the batched kernel refuses
            found = [torch.linalg.vector_norm(t) for t in singles]
        by_device = {}
        for indices, value in zip(shared, found):
            device = "cpu" if value.is_cpu else value.device
            entry = by_device.get(device)
            if entry is None:
                by_device[device] = ([indices], [value])
            else:
                entry[0].append(indices)
                entry[1].append(value)
        parts.extend((owners, torch.stack([v.float() for v in found])) for owners, found in by_device.values())
    for owners, found in parts:
        for indices, value in zip(owners, found.tolist()):
            for i in indices:
                values[i] = value
    return values


def _stacked_norms(torch, tensors, again=True):
    """The norms of small tensors all of one shape and device (a long elementwise chain's gradients), from one
    stack, without looking at each tensor in Python; None when they are not alike (stack refuses them). The one
    usual exception, a few 0-d gradients among them (the loss's), is taken apart and tried once more."""
    try:
        stacked = torch.stack(tensors)
    except (RuntimeError, TypeError):
        if not again:
            return None
        shaped = [i for i, t in enumerate(tensors) if t.dim()]
        if not 0 < len(tensors) - len(shaped) <= 4:
            return None
        values = _stacked_norms(torch, [tensors[i] for i in shaped], again=False)
        if values is None:
            return None
        found = [None] * len(tensors)
        for i, value in zip(shaped, values):
            found[i] = value
        for i, t in enumerate(tensors):
            if found[i] is None:
                found[i] = abs(t.item())  # (one host sync each, for at most four)
        return found
    if not (stacked.is_floating_point() or stacked.is_complex()):
        stacked = stacked.float()
    if stacked.dim() == 1:  # 0-d tensors
        return stacked.abs().tolist()
    return torch.linalg.vector_norm(stacked.flatten(1), dim=1).tolist()


def _floating(t):
    return t if t.is_floating_point() or t.is_complex() else t.float()


def _dense(t):
    """Whether ``t`` covers its elements without gaps or repeats, in some order (contiguous, or a transpose of a
    contiguous matrix): then its address and size tell which elements it holds."""
    return t.is_contiguous() or (t.dim() == 2 and t.t().is_contiguous())


class OutputChecks:
    """Ops' outputs waiting for the NaN/Inf check, done in batches when the held outputs pass a budget, at each
    backward and when the trace stops: no host sync per op. Outputs of one trailing shape are concatenated in
    one call (no per-output reshape) and summed; a sum that is not finite sends us to the exact check."""

    __slots__ = ("torch", "builder", "pending", "held", "value")

    def __init__(self, torch, builder):
        self.torch = torch
        self.builder = builder
        self.pending = []  # (node key, detached output)
        self.held = 0
        self.value = None  # what ``flush`` was asked to read, when read with the check's sum

    def add(self, key, output):
        if not output.is_floating_point():  # (integers and booleans hold no NaN)
            return
        self.pending.append((key, output.detach()))
        self.held += output.nbytes
        if self.held > _NORM_BUDGET or len(self.pending) > 4096:
            self.flush()

    def flush(self, read=None):
        """Check the held outputs. ``read``: a one-element floating tensor whose value is wanted too (a backward's
        loss): read in the same transfer as the check's sum where the two are alike, else on its own; its value
        is returned (one host sync per backward where there were two)."""
        self.value = None
        self._flush(read)
        value, self.value = self.value, None
        return value if value is not None or read is None else _loss_value(read)

    def _flush(self, read):
        pending = self.pending
        held = self.held
        self.pending = []
        self.held = 0
        if not pending:
            return
        torch = self.torch
        total = None
        if len(pending) >= _ATTEMPT:  # a long chain's outputs, of one trailing shape on one device: one concatenation
            outputs = [t for _, t in pending]
            try:
                total = self._item(torch.cat(outputs).sum(), read)
            except (RuntimeError, TypeError):  # a 0-d one among them (the loss) refuses to be concatenated
                scalars = [t for t in outputs if not t.dim()]
                try:
                    total = torch.cat([t for t in outputs if t.dim()]).sum().item() + \
                        (torch.stack(scalars).sum().item() if scalars else 0.0)
                except (RuntimeError, TypeError):
                    pass
        elif len(pending) > 1 and held <= _SMALL_COPY:
            # a few small outputs of mixed shapes (an MLP step's activations): flattened into one concatenation, one
            # sum and one host sync, where summing each kind apart cost several kernels (the result is only tested
            # for being finite; an overflow goes on to the exact check as before). Large ones are summed where they
            # lie (below): a copy would cost more than the kernels it saves.
            try:
                total = self._item(self.torch.cat([t.reshape(-1) for _, t in pending]).sum(), read)
            except (RuntimeError, TypeError):  # on several devices
                pass
        if total is None:
            total = self._sum_by_kind(pending)
        if total - total == 0:  # the usual answer: all finite (a sum that overflows goes on to the exact check)
            return
        pending = [(key, t) for key, t in pending if t.numel()]
        values = norms(torch, [t for _, t in pending])
        for (key, t), v in zip(pending, values):
            if v - v != 0 and not bool(t.isfinite().all()):  # a norm can overflow: then the values decide
                self.builder.nonfinite_output(key)

    def _item(self, total, read):
        """``total.item()``, with ``read``'s value taken in the same transfer (into ``value``) when alike."""
        if read is None or read.dtype != total.dtype or read.device != total.device:
            return total.item()
        total, self.value = self.torch.stack((total, read.detach().reshape(()))).tolist()
        return total

    def _sum_by_kind(self, pending):
        torch = self.torch
        groups = {}
        for _, t in pending:
            device = "cpu" if t.is_cpu else t.device  # (t.device builds an object)
            kind = (t.shape[1:], t.dtype, device) if t.dim() else ((), t.dtype, device, 0)
            found = groups.get(kind)
            if found is None:
                groups[kind] = [t]
            else:
                found.append(t)
        by_device = {}  # device -> the sums of its groups (a group of one is summed where it lies: no copy)
        for kind, ts in groups.items():
            total = ts[0].sum() if len(ts) == 1 else (torch.cat(ts) if len(kind) == 3 else torch.stack(ts)).sum()
            by_device.setdefault(kind[2], []).append(total if total.dtype == torch.float32 else total.float())
        return sum(torch.stack(parts).sum().item() for parts in by_device.values())


class _HookCall:
    """A user's tensor hook, wrapped to report each call; returns what the hook returns."""

    __slots__ = ("adapter", "tensor", "hook", "__weakref__")

    def __init__(self, adapter, tensor, hook):
        self.adapter = adapter
        self.tensor = weakref.ref(tensor)
        self.hook = hook

    def __call__(self, grad):
        t = self.tensor()
        if t is not None:
            self.adapter.hook_called(t, self.hook)
        return self.hook(grad)


def _written(t, func, args):
    """The part of ``t`` an in-place call wrote: for ``t[index] = value`` the indexed view when the index picks
    one (basic indexing), else all of ``t``."""
    if getattr(func, "__name__", None) == "__setitem__" and len(args) > 1 and args[0] is t:
        try:
            part = t.detach()[args[1]]
        except Exception:  # an index this tensor's current shape no longer takes: all of it then
            return t
        if part.untyped_storage().data_ptr() == t.untyped_storage().data_ptr():  # a view, not a gathered copy
            return part
    return t


def _node_name_of(func):
    """The name PyTorch gives the node of an in-place call that built none (under ``no_grad``, on ``.grad``):
    ``zero_`` -> ``ZeroBackward0``, ``__iadd__`` -> ``AddBackward0``, ``fill_`` -> ``FillBackward0``."""
    name = getattr(func, "__name__", None) or ""
    name = name.strip("_")
    if name.startswith("i") and name[1:] in ("add", "sub", "mul", "truediv", "div", "pow", "and", "or", "xor"):
        name = name[1:]
    name = {"truediv": "div"}.get(name, name)
    if not name:
        return None
    return "".join(part.capitalize() for part in name.split("_")) + "Backward0"


def _error(error, call):
    """PyTorch's backward errors are RuntimeErrors: classified by their (stable) wording."""
    message = str(error).split("\n")[0]
    info = {"type": type(error).__name__, "message": message, "code": None}
    last = call.nodes[-1] if call.nodes else None
    if "modified by an inplace operation" in message:
        info.update(code="stale-version", node=last)
        found = stale_versions(_stale_pattern[0], message)
        if found:
            info["current"], info["expected"] = found
    elif "backward through the graph a second time" in message or "have already been freed" in message:
        info.update(code="graph-freed", node=last)
    elif "implicitly created only for scalar outputs" in message:
        info.update(code="nonscalar-backward", variable=call.roots[0] if call.roots else None)
    elif "does not require grad and does not have a grad_fn" in message:
        info.update(code="no-requires-grad", variable=call.roots[0] if call.roots else None)
    return info


def _reissue(caught, frame):
    for w in caught:
        if frame is None:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
            continue
        module = frame.f_globals.get("__name__", "__main__")
        registry = frame.f_globals.setdefault("__warningregistry__", {})
        warnings.warn_explicit(w.message, w.category, frame.f_code.co_filename, frame.f_lineno, module=module,
                               registry=registry)


def _is_loss(root):
    """Whether a backward's single root is one floating-point value (a loss)."""
    try:
        return root.numel() == 1 and root.dtype.is_floating_point
    except Exception:  # a root of a kind that has no size (exact memory's packed values)
        return False


def _loss_value(root):
    """A loss (``_is_loss``) as a float, or None when it does not read as a number."""
    try:
        return float(root.detach())
    except Exception:  # a root of a kind that does not read as a number (exact memory's packed values)
        return None
