"""What a light iteration still watches on PyTorch: the rare calls where the classic mistakes happen.

A light iteration has no function mode on its thread (``torch/light``), so no op reaches Python. The mistakes
gradviz names at a line happen in a few rare calls, and only those are wrapped while light, on ``torch.Tensor``
itself (and the in-place functions of ``torch``, ``torch._C._nn`` and ``torch._VF``), so an iteration pays only for
the calls it makes of them:

- ``.grad`` reads: a non-leaf's read (a leaf's, the usual one, goes straight through) is recorded by the full
  handler, at the user's line (none-grad, and the ``backward(x.grad)`` that follows it);
- ``.data``: which tensors are ``.data`` of a tensor that requires grad (a write through one is the silent case);
- in-place writes (methods, ``x[...] = ``, ``+=``, ``torch.relu_``…): each is logged with its line and the version
  it left, weakly; a write through ``.data`` of a tensor in flight is recorded by the full handler at once
  (silent-inplace), and the next backward is then traced in full to see the saved value used;
- ``out=`` writes, through the functions the user's files call with ``out=`` (``out_calls``; only those are
  wrapped): logged like an in-place method's;
- ``.numpy()`` / ``__array__`` of a cut of a value in flight (``e.detach().numpy()``): the array's bytes are
  copied (``WatchMemory.handout``) and compared when the next backward starts; a write through it (the silent case)
  is then recorded as the full handlers record it;
- ``register_hook``: recorded by the full handler (the event, and each call of the hook);
- ``backward``'s errors (``torch/light``): a backward that raises is recorded after the fact, its graph as
  external nodes, and a stale-version error is traced back through the write log to the write that made it.

A finding also makes the next iterations full (``TraceBuilder.light_finding``), where the rest is recorded.
"""

import sys
import threading
from threading import get_ident as _ident

from ...frames import location_at
from ...light_watch import WatchMemory
from ...out_calls import names_called_with_out, user_files, user_modules
from . import graph as tg
from .cache_watch import cache_write
from .frames import user_frame
from .patches import _forked

_MISSING = object()
# in-place methods that change no value a graph may have saved, or are reported otherwise
_NOT_WRITES = {"requires_grad_", "share_memory_", "detach_", "retain_grad", "record_stream_"}
_DUNDERS = ("__setitem__", "__iadd__", "__isub__", "__imul__", "__itruediv__", "__idiv__", "__ifloordiv__",
            "__imod__", "__ipow__", "__iand__", "__ior__", "__ixor__", "__ilshift__", "__irshift__")


class TorchWatch:
    """The wrapped calls of one ``TorchLight``; ``install`` while light, ``uninstall`` when full again."""

    def __init__(self, light):
        self.light = light
        self.adapter = light.adapter
        self.torch = light.torch
        self.memory = WatchMemory()  # the cuts and in-place writes seen
        self._patched = []  # (owner, name, what it had in its own __dict__, or _MISSING)
        self._targets = None
        self._out_wrapped = {}  # (id(owner), name) -> its out= wrapper, made once
        self._out_targets = None  # (its key, [(owner, name, wrapper)], the user's modules) of the last install

    # ----- is this call the user's, on the light thread? ------------------------------------------------------
    def watching(self):
        adapter = self.adapter
        tls = adapter.tls
        return (self.light.on and adapter.attached and _ident() == adapter.mode_thread and not tls.quiet
                and not tls.light_step and not _forked[0] and not adapter._is_compiling())

    # ----- installing -----------------------------------------------------------------------------------------
    def install(self):
        if self._patched:
            return
        patched = self._patched
        owners = {}  # id(owner) -> its __dict__ (a mappingproxy made per read: read once per owner, not per name)
        for owner, name, wrapper in self._wrappers() + self._out_wrappers():
            attrs = owners.get(id(owner))
            if attrs is None:
                attrs = owners[id(owner)] = owner.__dict__
            patched.append((owner, name, attrs.get(name, _MISSING)))
            setattr(owner, name, wrapper)

    def uninstall(self):
        for owner, name, before in reversed(self._patched):
            if before is _MISSING:
                try:
                    delattr(owner, name)
                except AttributeError:
                    pass
            else:
                setattr(owner, name, before)
        self._patched = []

    def _wrappers(self):
        """(owner, name, wrapper) for every call watched; built once per adapter."""
        if self._targets is None:
            torch = self.torch
            T = torch.Tensor
            base = torch._C.TensorBase
            targets = [(T, "grad", self._grad_property(base.__dict__["grad"])),
                       (T, "data", self._data_property(base.__dict__["data"])),
                       (T, "detach", self._detach(T.detach)),
                       (T, "requires_grad_", self._requires_grad_(T.requires_grad_)),
                       (T, "numpy", self._numpy(T.numpy, "numpy")),
                       (T, "__array__", self._numpy(T.__array__, "__array__")),
                       (T, "register_hook", self._register_hook(T.register_hook))]
            for name in dir(base):
                if name.endswith("_") and not name.startswith("_") and name not in _NOT_WRITES:
                    targets.append((T, name, self._method(getattr(T, name), name)))
            for name in _DUNDERS:
                original = getattr(T, name, None)
                if original is not None:
                    targets.append((T, name, self._method(original, name)))
            functions = torch._C._VariableFunctions
            for owner in (torch, torch._C._nn, torch._VF):
                for name in dir(functions if owner is not torch._C._nn else owner):
                    if not name.endswith("_") or name.startswith("_") or name in _NOT_WRITES:
                        continue
                    original = getattr(owner, name, None)
                    if callable(original):
                        targets.append((owner, name, self._function(original, name)))
            self._targets = targets
        return self._targets

    def _out_wrappers(self):
        """(owner, name, wrapper) for the functions the user's files call with ``out=`` (read again at each
        install when other code may have been loaded since the last: otherwise the last install's, as classifying
        two thousand modules again was most of a switch to light).

        The key: ``sys.modules``' size, the imports looked up since (``_imports``, a finder first on
        ``sys.meta_path``: a reload too, which keeps the module object), and the user's own modules by identity
        (a handful; one replaced by another at the same size, loaded by hand, is a new object)."""
        key = (len(sys.modules), _imports())
        last = self._out_targets
        if last is not None and last[0] == key and all(sys.modules.get(name) is module for name, module in last[2]):
            return last[1]
        torch = self.torch
        wrapped = self._out_wrapped
        targets = []
        for name in sorted(names_called_with_out(user_files())):
            for owner in (torch, torch._C._nn, torch.linalg, torch.special, torch.fft):
                original = owner.__dict__.get(name)
                if not callable(original) or isinstance(original, type):
                    continue
                wrapper = wrapped.get((id(owner), name))
                if wrapper is None:
                    wrapper = wrapped[(id(owner), name)] = self._with_out(original, name)
                targets.append((owner, name, wrapper))
        self._out_targets = (key, targets, user_modules())
        return targets

    def _with_out(self, original, name):
        """A function called with ``out=`` somewhere in the user's code: while watching, each tensor it writes
        is noted as an in-place write (``written``)."""
        watch = self
        Tensor = self.adapter._Tensor

        def with_out(*args, **kwargs):
            out = kwargs.get("out")
            if out is None or not watch.watching():
                return original(*args, **kwargs)
            outs = [o for o in (out if isinstance(out, (tuple, list)) else (out,)) if isinstance(o, Tensor)]
            olds = [_version(o) for o in outs]
            result = original(*args, **kwargs)
            for o, old in zip(outs, olds):
                if old is not None:
                    watch.written(o, name, old)
            return result

        with_out.__name__ = name
        with_out.__doc__ = getattr(original, "__doc__", None)
        with_out.__wrapped__ = original
        return with_out

    def _numpy(self, original, name):
        watch = self

        def numpy(t, *args, **kwargs):
            result = original(t, *args, **kwargs)
            if watch.memory.aliases and watch.watching():
                watch.handed_out(t, result)
            return result

        numpy.__name__ = name
        numpy.__doc__ = original.__doc__
        numpy.__wrapped__ = original
        return numpy

    def _register_hook(self, original):
        watch = self

        def register_hook(t, hook):
            if not watch.watching():
                return original(t, hook)
            return watch.hook_registered(original, t, hook)

        register_hook.__name__ = "register_hook"
        register_hook.__doc__ = original.__doc__
        register_hook.__wrapped__ = original
        return register_hook

    def _grad_property(self, descriptor):
        get = descriptor.__get__
        watch = self

        def grad(t):
            if t.is_leaf or not watch.watching() or t.retains_grad:
                return get(t)
            return watch.grad_read(get, t)

        put = descriptor.__set__

        light = self.light

        def set_grad(t, value):
            put(t, value)
            if light.on:  # ``p.grad = None``: a reset (grad-accumulation), from any thread
                light.summed.reset((id(t),))

        return _Attribute(descriptor, grad, set_grad)

    def _data_property(self, descriptor):
        get = descriptor.__get__
        watch = self

        def data(t):
            value = get(t)
            if t.requires_grad and watch.watching():
                watch.memory.cut(t, value, "data")
            return value

        return _Attribute(descriptor, data, descriptor.__set__)

    def _detach(self, original):
        watch = self

        def detach(t):
            value = original(t)
            if t.requires_grad and watch.watching():
                watch.memory.cut(t, value, "detach")
            return value

        detach.__name__ = "detach"
        detach.__doc__ = original.__doc__
        detach.__wrapped__ = original
        return detach

    def _requires_grad_(self, original):
        """``requires_grad_`` while light. A parameter's freeze is noted here on light iterations and by the mode's
        handler (``patches._requires_grad_call``) on full ones: this wrapper is installed only while light, and the
        mode passes every call through while light. A thread that keeps its mode (not the light one) reaches this
        wrapper twice for one call: torch hands the mode ``Tensor.requires_grad_`` looked up by name (this
        wrapper), which the mode calls through; only the outer call notes."""
        watch = self
        frozen = getattr(self.adapter.training_watch, "frozen", None)
        inside = threading.local()

        def requires_grad_(t, requires_grad=True):
            if getattr(inside, "call", False):
                return original(t, requires_grad)
            inside.call = True
            try:
                result = original(t, requires_grad)
            finally:
                inside.call = False
            if requires_grad and watch.memory.aliases and watch.watching():
                watch.bridged(t, t)
            if frozen is not None:  # a parameter frozen (or unfrozen) here (frozen_watch)
                frozen.noted(t, requires_grad)
            return result

        requires_grad_.__name__ = "requires_grad_"
        requires_grad_.__doc__ = original.__doc__
        requires_grad_.__wrapped__ = original
        return requires_grad_

    def _method(self, original, name):
        return self._inplace(original, name, f"Tensor.{name}", lambda t: True)

    def _function(self, original, name):
        Tensor = self.adapter._Tensor
        return self._inplace(original, name, name, lambda t: isinstance(t, Tensor))

    def _inplace(self, original, name, qualname, writes_tensor):
        """An in-place method or function: run unchanged; while watching, the write is noted (``written``)."""
        watch = self
        stored = name == "__setitem__"  # (``t[i] = value``: the value, for ``cache_write``)

        def inplace(t, *args, **kwargs):
            if not watch.watching() or not writes_tensor(t):
                return original(t, *args, **kwargs)
            try:
                old = t._version
            except RuntimeError:  # an inference tensor has no version counter
                return original(t, *args, **kwargs)
            result = original(t, *args, **kwargs)
            watch.written(t, name, old, args[1] if stored and len(args) > 1 else None)
            return result

        inplace.__name__ = name
        inplace.__qualname__ = qualname
        inplace.__doc__ = getattr(original, "__doc__", None)
        inplace.__wrapped__ = original
        return inplace

    # ----- what is seen ---------------------------------------------------------------------------------------
    def grad_read(self, get, t):
        """A non-leaf's ``.grad`` read by the user's code: the full handler records it (and re-issues PyTorch's
        warning at the user's line); a None read is a finding."""
        adapter = self.adapter
        self.light.finding()
        return adapter.grad_get(get, (t,), {})

    def bridged(self, value, result):
        """``result`` (a new tensor on ``value``'s memory, or ``value`` itself) requires grad, and ``value`` was cut
        from a graph on this light iteration: two graphs bridged by hand (``Variable(y1.data, requires_grad=True)``,
        ``y1.detach().requires_grad_()``). The cut is recorded at this line, and the rest of the iteration in
        full, where the backward calls that carry the gradient across are."""
        found = self.memory.cut_source(value, value._base, None) if isinstance(value, self.adapter._Tensor) else None
        if found is None or not getattr(result, "requires_grad", False):
            return
        source, how = found
        adapter = self.adapter
        self.light.finding()
        frame = user_frame(1)
        location = None if frame is None else location_at(frame.f_code, frame.f_lineno)
        try:
            with adapter.lock:
                skey = adapter.var(source)
                if id(value) not in adapter.builder.live_variables:
                    adapter.new_var(value, how, location)
                owner = adapter.builder.cut(skey, how, location, result=id(value))
                adapter._remember_cut(value, owner, how)
        except Exception as exc:
            adapter.internal_error("light cut", exc)
        self.light.escalate()

    def hook_registered(self, original, t, hook):
        """``t.register_hook(hook)`` on a light iteration: the registration event at its line, and each call of
        the hook, as the full handler records them; ``t`` is recorded without its graph (whose saved values a
        light backward frees unrecorded: they would stay known as saved, and be matched by later writes)."""
        from .events import _HookCall

        adapter = self.adapter
        handle = original(t, _HookCall(adapter, t, hook))
        frame = user_frame(1)
        location = None if frame is None else location_at(frame.f_code, frame.f_lineno)
        try:
            with adapter.lock:
                builder = adapter.builder
                builder.light_event()
                if id(t) not in builder.live_variables:
                    adapter.new_var(t, "external", location)
                adapter.hook_fact(id(t), "register", location, hook)
        except Exception as exc:
            adapter.internal_error("light hook", exc)
        return handle

    def handed_out(self, t, array):
        """``t.numpy()`` (or ``np.asarray(t)``) on the light thread, where ``t`` is a cut of a value a graph may
        still need (a non-leaf's, or a leaf's while a forward is in flight): the array's bytes are copied, and
        compared at the next backward (``numpy_written``)."""
        found = self.memory.cut_source(t, t._base, None)
        if found is None or (found[0].is_leaf and not self.light.forward_calls):
            return
        frame = user_frame(1)
        location = None if frame is None else location_at(frame.f_code, frame.f_lineno)
        self.memory.handout(found[0], t, array, location, found[1])

    def numpy_written(self, frame, backward_location):
        """A light backward is starting: the numpy arrays handed out since the last one and written since are
        recorded as the full handlers record them (the cut, the hand-out, the nodes that saved that memory), with
        the write found now, before backward reads the changed values (silent-inplace)."""
        changed = self.memory.changed_handouts()
        if not changed:
            return
        adapter = self.adapter
        builder = adapter.builder
        self.light.finding()
        try:
            with adapter.lock:
                for source, t, array, location, how in changed:
                    skey = adapter.var(source)  # (its graph, with what each node saved, as external nodes)
                    if id(t) not in builder.live_variables:
                        adapter.new_var(t, how, location)
                    owner = builder.cut(skey, how, location, result=id(t))
                    adapter._remember_cut(t, owner, how)
                    tkey = adapter.var(t)
                    owner = builder.cut(tkey, "numpy", location, result=None)
                    adapter._remember_cut(array, owner, "numpy")
                    savers = builder.saved_storages.get(tg.storage_key(t)[0]) or {}
                    builder.light_numpy_write(tkey, location, [rec.key for rec in list(savers.values())
                                                               if rec.alive and not rec.freed], backward_location)
                adapter.name_from_frame(frame)  # (what the user's code calls the value, as a full backward does)
        except Exception as exc:
            adapter.internal_error("light numpy write", exc)
        self.light.full_backward = True  # (this backward: its record says which saved values it freed)

    def written(self, t, op, old, stored=None):
        """An in-place write by the user's code (``old``: the version before it; ``stored``: what
        ``t[index] = stored`` stored)."""
        try:
            new = t._version
        except RuntimeError:
            return
        if new == old and op != "__setitem__":
            return  # (``x += 0`` on an integer-only path; nothing changed)
        self.light.summed.reset_grad(t)  # ``p.grad.zero_()``: a reset, if ``t`` is a stepped gradient
        frame = user_frame(1)
        if frame is None:
            return
        location = location_at(frame.f_code, frame.f_lineno)
        memory = self.memory
        found = memory.cut_source(t, t._base) if memory.aliases else None
        if found is not None and (not found[0].is_leaf or self.light.forward_calls):
            # the value of a graph's output, or a leaf's while a forward is in flight: a graph may have saved it
            self._silent(t, found[0], op, old, location)
            return
        memory.wrote(t, op, old, new, location)
        cache_write(self.adapter.builder, t, op, location, stored)  # (a view of a cached tensor written again?)

    def _silent(self, t, source, op, old, location):
        """A write through ``.data`` of ``source`` while its graph may still need the value: recorded as the full
        handler records one (the cut, then the write), and the next backward is traced in full."""
        adapter = self.adapter
        self.light.finding()
        try:
            with adapter.lock:
                skey = adapter.var(source)  # (its graph, with what each node saved, as external nodes)
                adapter.new_var(t, "data", location)
                owner = adapter.builder.cut(skey, "data", location, result=id(t))
                adapter._remember_cut(t, owner, "data")
                adapter.inplace(getattr(adapter.torch.Tensor, op, op), t, old, location)
        except Exception as exc:
            adapter.internal_error("light in-place write", exc)
        self.light.full_backward = True

    # ----- a backward that raised -------------------------------------------------------------------------------
    def failed_backward(self, error, args, kwargs, kind):
        """A light backward raised: record it as the full handler would have (its graph as external nodes), after
        the write that made a stale-version error, when the write log has it."""
        adapter = self.adapter
        self.light.finding()
        try:
            with adapter.lock:
                message = str(error)
                if "modified by an inplace operation" in message:
                    self._stale_write(message, args, kwargs)
                call = adapter._backward_begin(args, kwargs, kind)
                adapter._backward_end(call, error)
        except Exception as exc:
            adapter.internal_error("light backward error", exc)

    def _stale_write(self, message, args, kwargs):
        """Report the logged write that took a saved value past the version it was saved at."""
        from .compat import stale_versions
        from .events import _stale_pattern

        found = stale_versions(_stale_pattern[0], message)
        if found is None:
            return
        current, expected = found
        adapter = self.adapter
        roots = args[0] if args else kwargs.get("tensors")
        for r in (roots,) if isinstance(roots, adapter._Tensor) else (roots or ()):
            if isinstance(r, adapter._Tensor):
                adapter.var(r)  # the graph, with each node's saved counters
        best = self.memory.stale_write(expected, current, _version)
        if best is None:
            return
        t = best.ref()
        builder = adapter.builder
        savers = builder.saved_counters.get(tg.storage_key(t)[0]) or {}
        saved_by = [rec.id for rec in list(savers.values()) if rec.alive and not rec.freed]
        if not saved_by and tg.read_saved is not tg.read_data:
            saved_by = self._stale_savers(roots, message, found)
        if not saved_by:
            return
        builder.watched_inplace(adapter.var(t), best.op, best.old, best.new, best.location, saved_by)

    def _stale_savers(self, roots, message, versions):
        """Where this torch reads saved tensors only by unpacking them (before SavedTensor had ``.data``), a value
        changed in place after it was saved no longer unpacks: PyTorch raises the stale-version error instead, so
        the walk that registered the graph could not see what those nodes saved. The record ids of the live nodes
        under ``roots`` whose unpacking raises that error for the same tensor at the same versions."""
        from .compat import stale_versions
        from .events import _stale_pattern

        adapter = self.adapter
        live = adapter.builder.live_nodes
        described = _stale_tensor(message)
        pending = [tg.grad_fn_of(r) for r in ((roots,) if isinstance(roots, adapter._Tensor) else (roots or ()))
                   if isinstance(r, adapter._Tensor)]
        pending = [node for node in pending if node is not None]
        seen, found, held = set(), [], []  # (a node wrapper's id is reused once it dies: held for the walk)
        while pending:
            node = pending.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            held.append(node)
            pending.extend(child for child, _ in node.next_functions if child is not None)
            tag = tg.tag_of(node, adapter)
            rec = None if tag is None else live.get(tag.id)
            if rec is None or not rec.alive or rec.freed:
                continue
            for attr in tg.info(node).saved:
                try:
                    getattr(node, attr)
                except RuntimeError as exc:
                    text = str(exc)
                    if (stale_versions(_stale_pattern[0], text) == versions and _stale_tensor(text) == described):
                        found.append(rec.id)
                        break
        return found


class _Attribute(property):
    """A watched ``Tensor.grad`` or ``Tensor.data``: a property that still answers ``__objclass__`` and
    ``__name__`` as the C attribute it stands in for. Dynamo's first import on torch 2.4 and 2.9 lists
    ``Tensor.grad.__get__`` among its functions and reads ``__self__.__objclass__`` of it: with a plain property
    there, ``torch.compile`` first called on a light iteration raised AttributeError in the user's script."""

    def __init__(self, descriptor, get, put):
        super().__init__(get, put, descriptor.__delete__, descriptor.__doc__)
        self.__objclass__ = descriptor.__objclass__
        self.__name__ = descriptor.__name__


def _stale_tensor(message):
    """How a stale-version message describes its tensor (``[torch.FloatTensor [8, 4]]``)."""
    _, _, rest = message.partition("inplace operation: ")
    return rest.partition("]]")[0] or rest.partition(",")[0]


class _ImportCounter:
    """First on ``sys.meta_path`` while a trace is attached (``forget_imports`` takes it off when it ends): counts
    the modules looked up by the import system (a new import, a reload) and lets the other finders find them. One
    Python call per import that is not cached."""

    count = 0

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        cls.count += 1
        return None


def _imports():
    if _ImportCounter not in sys.meta_path:
        sys.meta_path.insert(0, _ImportCounter)
    return _ImportCounter.count


def forget_imports():
    """The trace ended: the import counter leaves ``sys.meta_path`` (the next trace's first key reads the user's
    files afresh: its watch has no key yet)."""
    while _ImportCounter in sys.meta_path:
        sys.meta_path.remove(_ImportCounter)


def _version(t):
    try:
        return t._version
    except RuntimeError:  # an inference tensor has no version counter
        return None
