"""The PyTorch adapter: watches real PyTorch and reports what it does to a ``TraceBuilder`` as neutral facts.

This module and its ``torch_*`` siblings are the only gradviz code that touches PyTorch's internals. How:

- A ``TorchFunctionMode`` (one per observed thread) sees every call of the Python API: ops, ``.grad`` reads and
  writes, ``.data`` / ``detach`` / ``numpy`` / ``item`` / ``tolist`` cuts, ``register_hook`` / ``retain_grad``,
  ``backward`` / ``autograd.grad``. The user's line is the first frame outside gradviz and torch.
- New graph nodes are found by walking ``out.grad_fn`` through ``next_functions`` to the nodes already known; a
  node is known by the ``NodeTag`` in its ``metadata`` (our key; its death tells us the node died) and reports
  the gradient it receives through a backward prehook (the tag is the hook).
- Saved tensors and retained memory: the node's ``_raw_saved_*`` attributes, read right after the op (PyTorch's
  own version checks stay intact). A non-retaining backward frees every node it ran.
- An in-place change: a tensor argument's ``_version`` moved during the call.
- Modules: global forward pre/post hooks. Optimizer steps: ``register_optimizer_step_pre/post_hook``.
- Not seen by the mode, so patched for the trace's duration and restored after: ``Function.apply`` (a custom
  Function's node gets its own line: ``on_custom_function`` is where those calls are seen),
  ``Optimizer.zero_grad`` / ``Module.zero_grad``, and ``Thread._bootstrap_inner`` (a thread started while
  tracing is observed too; threads started before are not).

Never break the script: PyTorch's calls run exactly as without the trace and their exceptions pass through
unchanged; our own bookkeeping failing is recorded in ``internal_errors`` instead. Under ``torch.compile`` (while
dynamo traces) and in forked child processes (DataLoader workers) every handler steps aside.
"""

import itertools
import os
import threading
import warnings
import weakref

from ..builder import LEAF, OutputFact, SavedFact
from ..frames import location_at, names_in_frame
from . import torch_graph as tg
from .torch_frames import caller_is_internal, set_torch_dir, user_frame
from .torch_modules import ModuleNames

SUPPORTED = (2, 4)  # the oldest torch this adapter is written for (tested with 2.13.0)
_CUT_MEMORY = 256  # how many recent cuts (.data/.detach/.numpy) are remembered to spot re-wrapping
_NORM_BUDGET = 64 << 20  # bytes of received gradients held during a backward before their norms are taken

_forked = [False]  # set in a forked child (DataLoader workers): the child records nothing
_current = [None]  # the active TorchAdapter (patched functions find it here)


def _after_fork_in_child():
    _forked[0] = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class TorchVersionError(ImportError):
    pass


def check_version(torch):
    """One line when the installed torch is older than this adapter supports."""
    parts = []
    for piece in torch.__version__.split("+")[0].split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits or 0))
    if tuple(parts) < SUPPORTED:
        raise TorchVersionError(f"gradviz's torch engine needs torch {SUPPORTED[0]}.{SUPPORTED[1]} or later; "
                                f"found torch {torch.__version__} (pip install 'gradviz[torch]')")


def dtype_name(dtype):
    return str(dtype).rpartition(".")[2]


class TorchAdapter:
    """Report what real PyTorch does, while started, to ``builder`` (a ``tracing.builder.TraceBuilder``)."""

    name = "torch"

    def __init__(self, builder):
        import torch

        check_version(torch)
        self.torch = torch
        self.b = builder
        self.active = False
        self._lock = threading.RLock()  # fact methods are not thread-safe; backward hooks may run on other threads
        self._keys = itertools.count(1)  # node keys: never reused (unlike id())
        self._var_refs = {}  # id(tensor) -> weakref (whose callback reports the death)
        self._watch = tg.DeathWatch(self._node_died)
        self._names = ModuleNames(self._parameters_named)
        self._tls = threading.local()  # per thread: module calls, optimizer step in progress
        self._devices = set()
        self._cut = {}  # id(cut result) -> (weakref or None, variable id it belongs to)
        self._backward = None  # per backward call: keys visited, pending norms (see _Backward)
        self._start_seq = {}  # thread id -> the sequence number of the first node built after start
        self._handles = []
        self._mode = None
        self._patched = []
        self._Tensor = torch.Tensor
        self._Parameter = torch.nn.Parameter
        self._is_compiling = torch.compiler.is_compiling
        self._special = _special_functions(torch)

    # ----- lifecycle ------------------------------------------------------------------------------------
    def start(self):
        if self.active:
            return self
        torch = self.torch
        set_torch_dir(os.path.dirname(torch.__file__))
        self.b.engine("torch", torch.__version__, ())
        self._start_seq[threading.get_ident()] = _next_sequence_nr(torch)
        self.active = True
        _current[0] = self
        from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook
        from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

        self._handles = [register_module_forward_pre_hook(self._module_enter),
                         register_module_forward_hook(self._module_exit, always_call=True),
                         register_optimizer_step_pre_hook(self._step_begin),
                         register_optimizer_step_post_hook(self._step_end)]
        self._patch()
        self._mode = _observing_mode(self)
        self._mode.__enter__()
        return self

    def stop(self):
        if not self.active:
            return self
        try:
            _remove_mode(self.torch, self._mode)
        finally:
            self.active = False
            if _current[0] is self:
                _current[0] = None
            for h in self._handles:
                h.remove()
            self._handles = []
            self._unpatch()
        with self._lock:
            self._name_from(user_frame(1))
            for key, ref in list(self._var_refs.items()):
                t = ref()
                if t is not None:
                    self.b.variable_state(key, requires_grad=bool(t.requires_grad))
        return self

    # ----- identity -----------------------------------------------------------------------------------------
    def var(self, t):
        """The key of tensor ``t``, reporting it first if we have not seen it (made before the trace, or by a
        path no handler saw): a parameter, or ``external``."""
        key = id(t)
        if key in self.b.live_variables:
            return key
        origin = "parameter" if isinstance(t, self._Parameter) else "external"
        node = t.grad_fn
        nkey = None if node is None else self._node_key(node, None)
        self._new_var(t, origin, None, node=nkey, module=())
        return key

    def _new_var(self, t, origin, location, node=None, module=None, grad_mode=True):
        key = id(t)
        device = self._device(t)
        rec = self.b.variable(key, origin, tuple(t.shape), dtype_name(t.dtype), _nbytes(t), bool(t.requires_grad),
                              location, node=node, grad_mode=grad_mode, module=module, device=device,
                              is_parameter=isinstance(t, self._Parameter))
        self._watch_var(t, key)
        return rec

    def _watch_var(self, t, key):
        refs = self._var_refs
        b = self.b

        def died(_ref, key=key):
            if refs.get(key) is _ref:
                del refs[key]
                if self.active:
                    with self._lock:
                        b.variable_died(key)

        try:
            refs[key] = weakref.ref(t, died)
        except TypeError:
            pass

    def _device(self, t):
        device = t.device
        if device.type == "cpu":
            name = "cpu"
        else:
            name = str(device)
        if name not in self._devices:
            self._devices.add(name)
            self.b.device("torch", name)
        return name

    def _node_key(self, node, location, **op_facts):
        """The key of ``node``, reporting it (and every unknown node it reaches) first."""
        tag = tg.tag_of(node, self)
        if tag is not None:
            return tag.id
        self._report_nodes(node, location, op_facts)
        return node.metadata[tg.KEY].id

    def _tag(self, node, report):
        tag = tg.NodeTag(next(self._keys), report, self)
        node.metadata[tg.KEY] = tag
        self._watch.watch(tag)
        return tag

    def _node_died(self, key):
        if self.active:
            with self._lock:
                self.b.node_died(key)

    # ----- nodes ------------------------------------------------------------------------------------------
    def _report_nodes(self, root, location, op_facts):
        """Report ``root`` and the unknown nodes it reaches, inputs first. Nodes built before the trace started
        are ``external``; the others were built by the op being reported (``op_facts``: its tensor arguments,
        outputs and call instruction) — one op can build several (``F.cross_entropy``)."""
        start = self._start_seq.get(threading.get_ident(), -1)
        for node in tg.new_nodes(root, self):
            if tg.is_accumulator(node):
                self._accumulator(node)
            elif location is None or 0 <= node._sequence_nr() < start:
                self._external(node)
            else:
                self._op_node(node, node is root, location, **op_facts)

    def _edges(self, node):
        edges = []
        for child, nr in node.next_functions:
            if child is None:
                edges.append(None)
            elif tg.is_accumulator(child):
                edges.append((self._accumulator(child), LEAF))
            else:
                edges.append((self._node_key(child, None), nr))
        return edges

    def _accumulator(self, node):
        """A leaf's AccumulateGrad: reported as the edge ``(leaf key, LEAF)``; tagged once, with a post hook
        that sees the gradient accumulated and the ``.grad`` backward made."""
        leaf = node.variable
        key = self.var(leaf)
        if tg.tag_of(node, self) is None:
            tag = tg.NodeTag(key, None, self)
            tag.leaf = weakref.ref(leaf)
            node.metadata[tg.KEY] = tag
            node.register_hook(_AccumulatorHook(tag))
        return key

    def _external(self, node):
        tag = self._tag(node, self._received)
        name = tg.node_name(node)
        custom, class_name = _class_of(node, name)
        shape, dtype = _output_meta(node)
        self.b.external_node(tag.id, name, class_name, custom, shape=shape, dtype=dtype)
        self.b.node_inputs(tag.id, self._edges(node))
        saved = self._saved(node, ())
        if saved:
            self.b.node_saved(tag.id, saved, freed=tg.is_freed(node))
        node.register_prehook(tag)

    def _op_node(self, node, is_root, location, tensors=(), outputs=(), lasti=-1, nonfinite=False):
        edges = self._edges(node)
        tag = self._tag(node, self._received)
        name = tg.node_name(node)
        custom, class_name = _class_of(node, name)
        in_keys = [self.var(t) for t in tensors]
        if not is_root:  # an inner node of one op: the arguments that feed it
            fed = {e[0] for e in edges if e is not None}
            in_keys = [k for k, t in zip(in_keys, tensors) if _edge_key(self, t) in fed]
        outs = []
        live = self.b.live_variables
        for o in outputs:
            if id(o) in live:  # an in-place op's target: the in-place fact re-points it
                continue
            fn = o.grad_fn
            mine = fn is not None and fn.metadata.get(tg.KEY) is tag
            if mine or is_root:
                outs.append(_output(id(o), tuple(o.shape), dtype_name(o.dtype), _nbytes(o), bool(o.requires_grad),
                                    not mine, self._device(o)))
                self._watch_var(o, id(o))
        hidden = None
        if not outs:
            # a value that never reached Python as its own tensor: the log_softmax inside cross_entropy, or an
            # in-place op's result before it was written into its target (gradviz's engine records that too)
            shape, dtype = _output_meta(node)
            hidden = ("value", tag.id)
            nbytes = 0
            if dtype is not None:
                nbytes = _numel(shape) * self.torch.empty((), dtype=getattr(self.torch, dtype)).element_size()
            outs.append(_output(hidden, shape, dtype or "", nbytes, True, False, None))
        self.b.op(tag.id, name, class_name, custom, edges, in_keys, outs, self._saved(node, tensors), location,
                  nonfinite=nonfinite and is_root, lasti=lasti)
        if hidden is not None:
            self.b.variable_died(hidden)
        node.register_prehook(tag)

    def _saved(self, node, tensors):
        """``SavedFact``s for what ``node`` saved: a saved tensor whose storage is an argument's is that
        argument (its memory is not charged when the argument is a leaf that requires grad: a parameter's
        storage belongs to the model); each block of memory is keyed by (device, storage address)."""
        facts = []
        for attr, index, t in tg.saved_tensors(node):
            if t is None:
                continue
            counter, block_bytes = tg.storage_key(t)
            block = counter
            vkey = None
            for a in tensors:
                if a.untyped_storage().data_ptr() == counter[1] and str(a.device) == counter[0]:
                    vkey = id(a)
                    if _is_parameter_storage(a):
                        block = None
                    break
            kind = "output" if "result" in attr else "input"
            facts.append(SavedFact(vkey if kind == "input" else None, kind, index, tuple(t.shape), _nbytes(t),
                                   t._version, counter, block, block_bytes, self._device(t)))
        return facts

    # ----- forward ------------------------------------------------------------------------------------------
    def op(self, func, args, kwargs):
        """Any other Python API call: run it, then report what it built or changed."""
        Tensor = self._Tensor
        tensors = []
        for a in args:
            if isinstance(a, Tensor):
                tensors.append(a)
            elif type(a) is list or type(a) is tuple:
                tensors.extend(x for x in a if isinstance(x, Tensor))
        if kwargs:
            out = kwargs.get("out")
            if isinstance(out, Tensor):
                tensors.append(out)
            elif isinstance(out, (list, tuple)):
                tensors.extend(x for x in out if isinstance(x, Tensor))
        try:
            before = [t._version for t in tensors]
        except RuntimeError:  # an inference tensor has no version counter
            before = None
        result = func(*args, **kwargs)
        try:
            with self._lock:
                self._after_op(func, args, tensors, before, result)
        except Exception as exc:  # our bookkeeping, never the script's problem
            self._internal_error("op", exc)
        return result

    def _after_op(self, func, args, tensors, before, result):
        Tensor = self._Tensor
        if isinstance(result, Tensor):
            outs = (result,)
        elif isinstance(result, (tuple, list)):
            outs = tuple(x for x in result if isinstance(x, Tensor))
        else:
            outs = ()
        changed = () if before is None else [i for i, t in enumerate(tensors) if t._version != before[i]]
        roots = []
        for o in outs:
            fn = o.grad_fn
            if fn is not None:
                tag = fn.metadata.get(tg.KEY)
                if tag is None or tag.owner is not self:
                    roots.append(fn)
        for i in changed:
            fn = tensors[i].grad_fn
            if fn is not None and fn not in roots:
                tag = fn.metadata.get(tg.KEY)
                if tag is None or tag.owner is not self:
                    roots.append(fn)
        requires = False
        for t in tensors:
            if t.requires_grad:
                requires = True
                break
        if not (roots or changed or requires):
            if not tensors and outs:
                self._created(func, args, outs)
            return
        frame = user_frame(2)
        location = None if frame is None else location_at(frame.f_code, frame.f_lineno)
        lasti = -1 if frame is None else frame.f_lasti
        if roots:
            facts = {"tensors": tensors, "outputs": outs, "lasti": lasti, "nonfinite": _nonfinite(outs)}
            for fn in roots:
                self._node_key(fn, location, **facts)
        elif requires and outs and not changed:
            self._unrecorded(func, tensors, outs, location)
        for i in changed:
            self._inplace(func, tensors[i], before[i], location)

    def _created(self, func, args, outs):
        """A tensor made from nothing (a factory, ``torch.tensor``) by the user's code."""
        if caller_is_internal():
            return
        name = getattr(func, "__name__", "")
        origin = "new" if name in ("tensor", "as_tensor", "from_numpy", "asarray", "Tensor") else "factory"
        frame = user_frame(3)
        location = None if frame is None else location_at(frame.f_code, frame.f_lineno)
        for o in outs:
            if id(o) in self.b.live_variables:
                continue
            rec = self._new_var(o, origin, location)
            if origin == "new" and args and self._cut:
                cut = self._cut.get(id(args[0]))
                if cut is not None and cut[0]() is args[0]:
                    self.b.wrapped(id(o), cut[1])
            del rec

    def _unrecorded(self, func, tensors, outs, location):
        torch = self.torch
        in_keys = [self.var(t) for t in tensors]
        facts = []
        for o in outs:
            if id(o) in self.b.live_variables:
                continue
            facts.append(_output(id(o), tuple(o.shape), dtype_name(o.dtype), _nbytes(o), bool(o.requires_grad), True,
                                 self._device(o)))
            self._watch_var(o, id(o))
        if facts:
            self.b.unrecorded_op(getattr(func, "__name__", str(func)), in_keys, facts, location,
                                 grad_mode=torch.is_grad_enabled(), volatile=False)

    def _inplace(self, func, t, old_version, location):
        key = self.var(t)
        new_version = t._version
        fn = t.grad_fn
        node = None if fn is None else self._node_key(fn, location)
        base = t._base
        base_key = base_node = None
        if base is not None and node is not None and base.grad_fn is not None:
            base_key = self.var(base)
            base_node = self._node_key(base.grad_fn, location)
        counter = None if self._cut_data(t) else tg.storage_key(t)[0]
        name = getattr(func, "__name__", None)
        self.b.inplace(key, old_version, new_version, counter, location, node=node, op=name, base=base_key,
                       base_node=base_node)

    def _cut_data(self, t):
        """Whether ``t`` (or its base) came from ``.data``: its version counter is its own, so an in-place change
        through it is not one PyTorch will notice (not a stale-version case)."""
        for x in (t, t._base):
            if x is not None:
                cut = self._cut.get(id(x))
                if cut is not None and cut[2] == "data" and cut[0]() is x:
                    return True
        return False

    # ----- cuts, hooks, .grad ---------------------------------------------------------------------------------
    def cut(self, func, args, kwargs, how):
        result = func(*args, **kwargs)
        if caller_is_internal() or not self._observing():
            return result
        try:
            with self._lock:
                source = args[0]
                frame = user_frame(2)
                location = None if frame is None else location_at(frame.f_code, frame.f_lineno)
                skey = self.var(source)
                rkey = None
                if isinstance(result, self._Tensor):
                    if result is source:
                        rkey = skey
                    else:
                        self._new_var(result, how, location)
                        rkey = id(result)
                owner = self.b.cut(skey, how, location, result=rkey)
                self._remember_cut(result, owner, how)
        except Exception as exc:
            self._internal_error("cut", exc)
        return result

    def _remember_cut(self, value, owner, how):
        try:
            ref = weakref.ref(value)
        except TypeError:  # a Python number: nothing can wrap its memory
            return
        self._cut[id(value)] = (ref, owner, how)
        if len(self._cut) > _CUT_MEMORY:
            del self._cut[next(iter(self._cut))]

    def grad_get(self, func, args, kwargs):
        t = args[0]
        if caller_is_internal() or not self._observing():
            return func(*args, **kwargs)
        frame = user_frame(2)
        if t.is_leaf or t.retains_grad:
            grad = func(*args, **kwargs)
        else:  # PyTorch warns here; under a mode the warning would point at our line: re-issue it at the user's
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                grad = func(*args, **kwargs)
            _reissue(caught, frame)
        try:
            with self._lock:
                location = None if frame is None else location_at(frame.f_code, frame.f_lineno)
                key = self.var(t)
                name = None
                if frame is not None and self.b.live_variables[key].name is None:
                    name = names_in_frame(frame, self._Tensor).get(key)
                self.b.grad_read(key, location, was_none=grad is None, is_leaf=bool(t.is_leaf),
                                 retains_grad=bool(t.retains_grad), requires_grad=bool(t.requires_grad), name=name)
        except Exception as exc:
            self._internal_error("grad_read", exc)
        return grad

    def grad_set(self, func, args, kwargs):
        result = func(*args, **kwargs)
        if caller_is_internal() or not self._observing():
            return result
        try:
            with self._lock:
                frame = user_frame(2)
                location = None if frame is None else location_at(frame.f_code, frame.f_lineno)
                self.b.grad_write(self.var(args[0]), location, is_none=args[1] is None)
        except Exception as exc:
            self._internal_error("grad_write", exc)
        return result

    def hook_register(self, func, args, kwargs, retain_grad):
        if caller_is_internal(func) or not self._observing():
            return func(*args, **kwargs)
        t = args[0]
        hook = None
        if not retain_grad:
            hook = args[1] if len(args) > 1 else kwargs.get("hook")
            wrapped = _HookCall(self, t, hook)
            args = (t, wrapped) + tuple(args[2:])
            kwargs = {k: v for k, v in kwargs.items() if k != "hook"}
        result = func(*args, **kwargs)
        try:
            with self._lock:
                frame = user_frame(2)
                location = None if frame is None else location_at(frame.f_code, frame.f_lineno)
                code = getattr(hook, "__code__", None)
                self.b.hook(self.var(t), "register", location, retain_grad=retain_grad,
                            hook_name=None if hook is None else getattr(hook, "__qualname__", type(hook).__name__),
                            hook_location=None if code is None else {"file": code.co_filename,
                                                                     "line": code.co_firstlineno})
        except Exception as exc:
            self._internal_error("hook", exc)
        return result

    def hook_called(self, t, hook):
        if not self._observing():
            return
        try:
            with self._lock:
                b = self._backward
                location = b.location if b is not None else None
                key = id(t)
                if key not in self.b.live_variables:
                    return
                code = getattr(hook, "__code__", None)
                self.b.hook(key, "call", location, hook_name=getattr(hook, "__qualname__", type(hook).__name__),
                            hook_location=None if code is None else {"file": code.co_filename,
                                                                     "line": code.co_firstlineno})
        except Exception as exc:
            self._internal_error("hook", exc)

    # ----- custom Functions ------------------------------------------------------------------------------------
    def on_custom_function(self, cls, args, outputs, location):
        """A user-defined ``autograd.Function``'s ``apply`` ran (``apply`` bypasses the function mode, so the
        patched ``Function.apply`` reports it here): its node gets this call's line, not its consumer's. This is
        the one place where custom Function calls are seen — where a check of their ``backward`` belongs."""
        Tensor = self._Tensor
        tensors = [a for a in args if isinstance(a, Tensor)]
        outs = outputs if isinstance(outputs, tuple) else (outputs,)
        outs = tuple(o for o in outs if isinstance(o, Tensor))
        for o in outs:
            fn = o.grad_fn
            if fn is not None:
                self._node_key(fn, location, tensors=tensors, outputs=outs, lasti=-1, nonfinite=_nonfinite(outs))
                break

    # ----- modules and optimizers ---------------------------------------------------------------------------
    def _calls(self):
        calls = getattr(self._tls, "calls", None)
        if calls is None:
            calls = self._tls.calls = []
        return calls

    def _module_enter(self, module, inputs):
        if not self._observing():
            return None
        try:
            with self._lock:
                calls = self._calls()
                if calls:
                    parent, parent_path = calls[-1]
                    frame = None
                else:
                    parent = parent_path = None
                    frame = user_frame(1)
                path = self._names.path(module, parent, parent_path, frame)
                calls.append((module, path))
                self.b.module_enter(id(module), path, type(module).__name__)
        except Exception as exc:
            self._internal_error("module", exc)
        return None

    def _module_exit(self, module, inputs, output):
        if not self._observing():
            return None
        try:
            with self._lock:
                calls = self._calls()
                for i in range(len(calls) - 1, -1, -1):
                    if calls[i][0] is module:
                        del calls[i:]
                        break
                self.b.module_exit(id(module))
        except Exception as exc:
            self._internal_error("module", exc)
        return None

    def _parameters_named(self, names):
        self.b.parameter_names(names)

    def _params_of(self, optimizer):
        params = []
        for group in getattr(optimizer, "param_groups", ()):
            params.extend(p for p in group.get("params", ()) if isinstance(p, self._Tensor))
        return params

    def _step_begin(self, optimizer, args, kwargs):
        if not self._observing():
            return
        params = self._params_of(optimizer)
        if getattr(self._tls, "step", None) is None:  # (a step that raised never reached _step_end)
            self._tls.quiet = getattr(self._tls, "quiet", 0) + 1
        self._tls.step = [(p, p._version) for p in params]  # its own ops are the update, reported at the end

    def _step_end(self, optimizer, args, kwargs):
        before = getattr(self._tls, "step", None)
        if before is None:
            return
        self._tls.step = None
        self._tls.quiet -= 1
        if not self._observing():
            return
        try:
            with self._lock:
                frame = user_frame(1)
                location = None if frame is None else location_at(frame.f_code, frame.f_lineno)
                name = type(optimizer).__name__
                keys = []
                for p, version in before:
                    key = self.var(p)
                    keys.append(key)
                    if p._version != version:
                        self.b.parameter_update(key, version, p._version, tg.storage_key(p)[0], location, name)
                self.b.optimizer("step", location, name, keys)
        except Exception as exc:
            self._internal_error("optimizer", exc)

    def zero_grad_called(self, owner):
        if not self._observing():
            return
        try:
            with self._lock:
                frame = user_frame(2)
                location = None if frame is None else location_at(frame.f_code, frame.f_lineno)
                if isinstance(owner, self.torch.nn.Module):
                    params = list(owner.parameters())
                else:
                    params = self._params_of(owner)
                self.b.optimizer("zero_grad", location, type(owner).__name__, [self.var(p) for p in params])
        except Exception as exc:
            self._internal_error("optimizer", exc)

    # ----- backward -------------------------------------------------------------------------------------------
    def backward(self, func, args, kwargs, kind):
        """``Tensor.backward``, ``torch.autograd.backward`` or ``torch.autograd.grad``."""
        if not self._observing():
            return func(*args, **kwargs)
        try:
            with self._lock:
                call = self._backward_begin(args, kwargs, kind)
        except Exception as exc:
            self._internal_error("backward", exc)
            return func(*args, **kwargs)
        error = None
        try:
            return func(*args, **kwargs)
        except BaseException as exc:
            error = exc
            raise
        finally:
            try:
                with self._lock:
                    self._backward_end(call, error)
            except Exception as exc:
                self._internal_error("backward", exc)

    def _backward_begin(self, args, kwargs, kind):
        torch = self.torch
        Tensor = self._Tensor
        names = ("tensors", "grad_tensors", "retain_graph", "create_graph") if kind != "grad" else \
            ("outputs", "inputs", "grad_outputs", "retain_graph", "create_graph")
        if kind == "method":
            names = ("tensors", "grad_tensors", "retain_graph", "create_graph", "inputs")
            bound = dict(zip(names, args))
            bound.update({"grad_tensors": kwargs.get("gradient", bound.get("grad_tensors"))})
        else:
            bound = dict(zip(names, args))
        bound.update({k: v for k, v in kwargs.items() if k in names})
        roots = bound.get("tensors" if kind != "grad" else "outputs")
        roots = [roots] if isinstance(roots, Tensor) else [r for r in (roots or ()) if isinstance(r, Tensor)]
        grads = bound.get("grad_tensors" if kind != "grad" else "grad_outputs")
        grads = [grads] if grads is None or isinstance(grads, Tensor) else list(grads)
        retain = bound.get("retain_graph")
        create = bool(bound.get("create_graph"))
        keep = create if retain is None else bool(retain)
        frame = user_frame(3)
        location = None if frame is None else location_at(frame.f_code, frame.f_lineno)
        self._name_from(frame)
        keys = [self.var(r) for r in roots]
        root_nodes = [None if r.grad_fn is None else self._node_key(r.grad_fn, None) for r in roots]
        starts = all(r.grad_fn is not None or r.requires_grad for r in roots) and \
            all(r.numel() == 1 or (i < len(grads) and grads[i] is not None) for i, r in enumerate(roots))
        self.b.backward_begin(keys, root_nodes, location, retain_graph=keep if starts else None,
                              kind="grad" if kind == "grad" else "backward",
                              gradient_none=any(g is None for g in grads))
        call = _Backward(location, keep, keys, torch)
        self._backward = call
        return call

    def _received(self, key, grad_outputs):
        """A node's prehook: backward is about to run node ``key`` with these gradients."""
        call = self._backward
        if call is None or not self.active:
            return
        call.visit(key, grad_outputs, False)

    def _backward_end(self, call, error):
        if call is None:
            return
        self._backward = None
        b = self.b
        for key, is_leaf, norm, leaf_ref in call.steps():
            if is_leaf:
                leaf = leaf_ref() if leaf_ref is not None else None
                if key not in b.live_variables:
                    continue
                gkey = None
                grad = None if leaf is None else leaf.grad
                if grad is not None and id(grad) not in b.live_variables:
                    gkey = id(grad)
                    self._new_var(grad, "grad", call.location)
                b.accumulate(key, norm, nonfinite=not _finite(norm), grad=gkey)
            elif key in b.live_nodes:
                b.backward_step(key, norm, nonfinite=not _finite(norm))
        if not call.keep:
            for key in call.nodes:
                b.buffers_freed(key)
        b.backward_end(None if error is None else self._error(error, call))

    def _error(self, error, call):
        message = str(error).split("\n")[0]
        info = {"type": type(error).__name__, "message": message, "code": None}
        last = call.nodes[-1] if call.nodes else None
        if "modified by an inplace operation" in message:
            info["code"] = "stale-version"
            info["node"] = last
            import re

            found = re.search(r"is at version (\d+); expected version (\d+)", message)
            if found:
                info["current"], info["expected"] = int(found.group(1)), int(found.group(2))
        elif "backward through the graph a second time" in message or "after they have already been freed" \
                in message:
            info["code"] = "graph-freed"
            info["node"] = last
        elif "implicitly created only for scalar outputs" in message:
            info["code"] = "nonscalar-backward"
            info["variable"] = call.roots[0] if call.roots else None
        elif "does not require grad and does not have a grad_fn" in message:
            info["code"] = "no-requires-grad"
            info["variable"] = call.roots[0] if call.roots else None
        return info

    # ----- helpers ----------------------------------------------------------------------------------------------
    def _observing(self):
        return self.active and not _forked[0] and not self._is_compiling()

    def _name_from(self, frame):
        if frame is None:
            return
        try:
            names = names_in_frame(frame, self._Tensor)
        except Exception:
            return
        if names:
            self.b.name_variables(names)

    def _internal_error(self, where, exc):
        self.b.internal_errors.append({"where": f"torch adapter: {where}", "type": type(exc).__name__,
                                       "message": str(exc).split("\n")[0]})

    # ----- patches ------------------------------------------------------------------------------------------
    def _patch(self):
        import torch

        Function = torch.autograd.function.Function
        original_apply = Function.__dict__["apply"]
        apply = original_apply.__func__

        def traced_apply(cls, *args, **kwargs):
            adapter = _current[0]
            if adapter is None or not adapter._observing():
                return apply(cls, *args, **kwargs)
            # torch's own Functions (a compiled region's CompiledFunction) run ops we must not report one by one
            internal = (getattr(cls, "__module__", "") or "").startswith("torch")
            tls = adapter._tls
            if internal:
                tls.quiet = getattr(tls, "quiet", 0) + 1
            try:
                outputs = apply(cls, *args, **kwargs)
            finally:
                if internal:
                    tls.quiet -= 1
            try:
                with adapter._lock:
                    frame = user_frame(1)
                    location = None if frame is None else location_at(frame.f_code, frame.f_lineno)
                    adapter.on_custom_function(cls, args, outputs, location)
            except Exception as exc:
                adapter._internal_error("Function.apply", exc)
            return outputs

        traced_apply.__wrapped__ = apply
        self._replace(Function, "apply", classmethod(traced_apply))
        for owner in (torch.optim.Optimizer, torch.nn.Module):
            self._replace(owner, "zero_grad", _zero_grad_wrapper(owner.__dict__["zero_grad"]))
        self._replace(threading.Thread, "_bootstrap_inner", _thread_wrapper(threading.Thread._bootstrap_inner))

    def _replace(self, owner, name, value):
        self._patched.append((owner, name, owner.__dict__[name]))
        setattr(owner, name, value)

    def _unpatch(self):
        for owner, name, value in reversed(self._patched):
            setattr(owner, name, value)
        self._patched = []


class _Backward:
    """One backward call in progress: the nodes it visits, in order, with the gradients they received. Their
    norms are taken in batches (``torch._foreach_norm``) once the held gradients pass a budget and at the end:
    no Python norm call and no host sync per node."""

    __slots__ = ("location", "keep", "roots", "torch", "nodes", "_order", "_grads", "_norms", "_held")

    def __init__(self, location, keep, roots, torch):
        self.location = location
        self.keep = keep
        self.roots = roots
        self.torch = torch
        self.nodes = []  # op nodes visited (keys), in order
        self._order = []  # (key, is_leaf, index into the norm list or -1, leaf weakref)
        self._grads = []
        self._norms = []
        self._held = 0

    def visit(self, key, grad_outputs, is_leaf, leaf=None):
        grads = [g for g in grad_outputs if g is not None]
        index = -1
        if grads:
            g = grads[0] if len(grads) == 1 else self.torch.cat([x.reshape(-1) for x in grads])
            index = len(self._norms) + len(self._grads)
            self._grads.append(g)
            self._held += g.numel() * g.element_size()
            if self._held > _NORM_BUDGET:
                self._flush()
        self._order.append((key, is_leaf, index, leaf))
        if not is_leaf:
            self.nodes.append(key)

    def _flush(self):
        if self._grads:
            self._norms.extend(self.torch._foreach_norm(self._grads))
            self._grads = []
            self._held = 0

    def steps(self):
        self._flush()
        values = self._values()
        for key, is_leaf, index, leaf in self._order:
            yield key, is_leaf, (0.0 if index < 0 else values[index]), leaf

    def _values(self):
        """All norms as floats: one transfer per device."""
        norms = self._norms
        if not norms:
            return []
        by_device = {}
        for i, n in enumerate(norms):
            by_device.setdefault(n.device, []).append(i)
        values = [0.0] * len(norms)
        for indices in by_device.values():
            stacked = self.torch.stack([norms[i].float() for i in indices]).tolist()
            for i, v in zip(indices, stacked):
                values[i] = v
        return values


class _AccumulatorHook:
    """A leaf's AccumulateGrad post hook: the gradient just accumulated into ``.grad``."""

    __slots__ = ("tag",)

    def __init__(self, tag):
        self.tag = tag

    def __call__(self, grad_inputs, grad_outputs):
        adapter = self.tag.owner
        call = adapter._backward
        if call is None or not adapter.active:
            return
        call.visit(self.tag.id, grad_outputs, True, self.tag.leaf)


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


def _special_functions(torch):
    """The calls the mode treats specially, by what PyTorch passes as ``func``."""
    T = torch.Tensor
    special = {
        T.grad.__get__: lambda a, f, args, kw: a.grad_get(f, args, kw),
        T.grad.__set__: lambda a, f, args, kw: a.grad_set(f, args, kw),
        T.data.__get__: lambda a, f, args, kw: a.cut(f, args, kw, "data"),
        T.detach: lambda a, f, args, kw: a.cut(f, args, kw, "detach"),
        T.detach_: lambda a, f, args, kw: a.cut(f, args, kw, "detach"),
        T.numpy: lambda a, f, args, kw: a.cut(f, args, kw, "numpy"),
        T.item: lambda a, f, args, kw: a.cut(f, args, kw, "item"),
        T.tolist: lambda a, f, args, kw: a.cut(f, args, kw, "tolist"),
        T.register_hook: lambda a, f, args, kw: a.hook_register(f, args, kw, False),
        T.retain_grad: lambda a, f, args, kw: a.hook_register(f, args, kw, True),
        T.backward: lambda a, f, args, kw: a.backward(f, args, kw, "method"),
        torch.autograd.backward: lambda a, f, args, kw: a.backward(f, args, kw, "backward"),
        torch.autograd.grad: lambda a, f, args, kw: a.backward(f, args, kw, "grad"),
    }
    passthrough = type(T.grad.__get__)  # other property reads (shape, requires_grad, grad_fn…): nothing to see
    return special, passthrough


def _observing_mode(adapter):
    from torch.overrides import TorchFunctionMode

    special, passthrough = adapter._special
    is_compiling = adapter._is_compiling
    tls = adapter._tls

    class GradvizMode(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if kwargs is None:
                kwargs = {}
            if not adapter.active or _forked[0] or is_compiling() or getattr(tls, "quiet", 0):
                return func(*args, **kwargs)
            handler = special.get(func)
            if handler is not None:
                return handler(adapter, func, args, kwargs)
            if type(func) is passthrough:
                return func(*args, **kwargs)
            return adapter.op(func, args, kwargs)

    return GradvizMode()


def _remove_mode(torch, mode):
    """Pop our mode from this thread's stack, even from under modes pushed after it (put back as they were): a
    mode left on a thread's stack at interpreter exit aborts the process."""
    from torch.overrides import _get_current_function_mode_stack

    stack = _get_current_function_mode_stack()
    if mode not in stack:
        return
    above = []
    while True:
        top = torch._C._pop_torch_function_stack()
        if top is mode:
            break
        above.append(top)
    for m in reversed(above):
        torch._C._push_on_torch_function_stack(m)


def _zero_grad_wrapper(original):
    def zero_grad(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        adapter = _current[0]
        if adapter is not None:
            adapter.zero_grad_called(self)
        return result

    zero_grad.__wrapped__ = original
    zero_grad.__doc__ = original.__doc__
    return zero_grad


def _thread_wrapper(original):
    def _bootstrap_inner(self):
        adapter = _current[0]
        if adapter is None or _forked[0]:
            return original(self)
        mode = _observing_mode(adapter)
        try:
            mode.__enter__()
        except Exception:
            return original(self)
        try:
            return original(self)
        finally:
            try:
                _remove_mode(adapter.torch, mode)
            except Exception:
                pass

    _bootstrap_inner.__wrapped__ = original
    return _bootstrap_inner


def _reissue(caught, frame):
    for w in caught:
        if frame is None:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
            continue
        module = frame.f_globals.get("__name__", "__main__")
        registry = frame.f_globals.setdefault("__warningregistry__", {})
        warnings.warn_explicit(w.message, w.category, frame.f_code.co_filename, frame.f_lineno, module=module,
                               registry=registry)


def _next_sequence_nr(torch):
    """The sequence number the next node built on this thread will get."""
    with torch.enable_grad():
        probe = torch.zeros((), requires_grad=True) * 1
    return probe.grad_fn._sequence_nr() + 1


def _nbytes(t):
    try:
        return t.numel() * t.element_size()
    except RuntimeError:
        return 0


def _nonfinite(outs):
    """Whether a floating output holds NaN/Inf: one reduction per output, on CPU only (on a GPU this would be a
    host sync per op; there the backward norms still find non-finite gradients)."""
    for o in outs:
        if o.is_floating_point() and o.device.type == "cpu" and o.numel():
            s = o.detach().sum().item()
            if s != s or s in (float("inf"), float("-inf")):
                if not bool(o.detach().isfinite().all()):
                    return True
    return False


def _finite(x):
    return x == x and x not in (float("inf"), float("-inf"))


def _class_of(node, name):
    """(user-defined?, class name) of a node: a custom Function's node is named after its Function class."""
    forward_cls = getattr(type(node), "_forward_cls", None)
    if forward_cls is not None:
        module = getattr(forward_cls, "__module__", "") or ""
        return not module.startswith("torch"), forward_cls.__name__
    return False, name


def _output_meta(node):
    """Shape and dtype of a node's output, from the metadata of the gradient it expects."""
    try:
        meta = node._input_metadata[0]
        return tuple(meta.shape), dtype_name(meta.dtype)
    except (AttributeError, IndexError, RuntimeError, TypeError):
        return (), None


def _is_parameter_storage(t):
    base = t._base if t._base is not None else t
    return base.is_leaf and base.requires_grad


def _edge_key(adapter, t):
    fn = t.grad_fn
    if fn is not None:
        tag = fn.metadata.get(tg.KEY)
        return None if tag is None else tag.id
    return id(t) if t.requires_grad else None



def _output(key, shape, dtype, nbytes, requires_grad, is_leaf, device):
    fields = dict(key=key, shape=shape, dtype=dtype, nbytes=nbytes, requires_grad=requires_grad, is_leaf=is_leaf,
                  device=device)
    return OutputFact(*[fields.get(f) for f in OutputFact._fields])


def _numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n
