"""The adapter for gradviz's own engine: an ``Observer`` that turns engine callbacks into builder facts.

This is the only tracing code that reads the engine's objects (``Variable._data``, ``_vc``, ``node._next``,
``node._saved``, ``AccumulateGrad``, ``Module._forward_hooks``…). Keys are ``id(obj)``; each Variable and node
it reports gets a weak reference (kept on its builder record as the record's ``handle``) whose callback
reports the death, so the trace never keeps a graph alive.

Per op: one cached frame walk (none inside gradviz's own modules: the user frame found when the outermost
module was called is reused), one fact, and one BLAS dot product for the NaN/Inf check.

Threads: the engine calls a ``Guard`` (guard.py), which holds the builder's lock around each callback here
(while the traced code runs no other thread, ``Guard.solo``, the engine calls these methods themselves),
switches the per-thread state of the builder and of this adapter when the calling thread changes (the module
calls in progress with their user frame, the ``.grad`` backward just made, the last op's class, the root module
being called: see ``switch_thread``), and records what fails here instead of raising it. Threads started while
attached run with the guard attached (threads.py).
"""

import threading
import weakref
from collections import OrderedDict
from math import isfinite, sqrt
from threading import current_thread, get_ident

import numpy as np

from ...._version import __version__ as _gradviz_version
from ....autograd import grad_mode
from ....autograd.function import AccumulateGrad
from ....autograd.observer import Observer, is_quiet
from ....autograd.variable import Variable
from ...backward_check import definition_line
from ...builder import LEAF
from ...facts import OutputFact, SavedFact
from ...frames import (
    _internal,
    _is_internal,
    location_at,
    location_of,
    name_in_frame,
    user_frame,
)
from ...records import safe_message
from .. import threads
from ..guard import Guard
from ..handouts import HandoutWatch
from ..mode_watch import gradviz_watch
from ..modules import ModuleNames
from ..numpy_values import _CHUNK, _dtype_names, dtype_name, nonfinite, nonfinite_norm, norm_of, norm_one
from ..numpy_values import scalar_root as _scalar
from ..numpy_values import storage_key as _storage
from ..optimizer_watch import gradviz_optimizers
from ..skeleton import EventSkeleton
from .light import GradvizLight
from .nan import data_line
from .probe import run_check
from .probe import signature as probe_signature

_is_grad_enabled = grad_mode.is_grad_enabled
_INF = float("inf")
_class_info = {}  # Function class -> (node name, class name, user-defined?)
_own_modules = {}  # Module class -> whether gradviz defines it (its forward calls no user code)
_fact = tuple.__new__  # _fact(SavedFact, (...)): a named fact without the namedtuple's Python __new__ frame
_CUT_MEMORY = 256  # how many recently cut arrays (.data/.detach/.numpy) are remembered to spot re-wrapping


class _Ref(weakref.ref):
    """A weak reference that knows its object's key (made with weakref.ref's constructor, ``key`` set after)."""

    __slots__ = ("key",)


def _raise_location(tb):
    """The innermost user frame of a traceback (where the user's code raised or called into gradviz)."""
    found = None
    while tb is not None:
        code = tb.tb_frame.f_code
        flag = _internal.get(id(code))
        if not (_is_internal(code) if flag is None else flag):
            found = (code, tb.tb_lineno)
        tb = tb.tb_next
    return None if found is None else location_at(*found)


def _info(node):
    cls = type(node)
    info = _class_info.get(cls)
    if info is None:
        info = _class_info[cls] = (node.name(), cls.__name__, not cls.__module__.startswith("gradviz."))
    return info


def _saved_on(savers, storage):
    """``(node key, node, position, (node ref, position))`` of each live saved array on ``storage``."""
    for rec in list(savers.values()):
        node = rec.handle() if rec.handle is not None else None
        saved = getattr(node, "_saved", None) if node is not None else None
        if not saved or rec.freed:
            continue
        ref = weakref.ref(node)
        for k, item in enumerate(saved):
            data = item[0]
            if data.__class__ is np.ndarray and _storage(data) == storage:
                yield id(node), node, k, (ref, k)


def _saved_now(where):
    """The array a node saves at a position now (an in-place op may have re-pointed it since), or None."""
    ref, k = where
    node = ref()
    saved = None if node is None else node._saved
    return saved[k][0] if saved and k < len(saved) else None


def _saved_copy(where):
    return _saved_now(where).copy()


def _saved_same(copy, where):
    now = _saved_now(where)
    return now is None or np.array_equal(now, copy, equal_nan=True)


def _node_ref(node, key):
    return weakref.ref(node)


class GradvizAdapter(Observer, EventSkeleton):
    """Watches gradviz's engine for a ``TraceBuilder``. ``attach``/``detach`` start and stop watching."""

    name = "gradviz"
    value_type = Variable

    def __init__(self, builder):
        self.builder = builder
        builder.engine("gradviz", _gradviz_version, ("cpu",))
        self.names = ModuleNames()
        # (module, the user frame that called the outermost module when every module in the call stack is
        # gradviz's own (else None), the thread, (that frame's Location, its f_lasti) or None), innermost last.
        # The frame waits in that call, so its place is read once for every op inside. Frames are held only
        # while their call runs.
        self._calls = []
        self._global_names = {}  # id(globals dict) -> (its size, names bound to Variables) at the last full pass
        self._cut = OrderedDict()  # id(array) -> (weakref to the array, variable id it was cut from)
        self._new_grad = None  # the _Ref of the .grad backward just made (on_accumulate says whose)
        # saved values a numpy array was handed out on, compared when backward reaches their node (handouts.py)
        self.handouts = HandoutWatch(builder, _saved_copy, _saved_same, _node_ref)
        self._watch = self.handouts.nodes  # (read on the backward path: empty, one truth test)
        self._last_fn = None
        self._thread_ref = weakref.ref(current_thread())
        self.thread_ident = get_ident()  # whose state the attributes above hold (see switch_thread)
        self._thread_states = {}  # ident -> (Thread weakref, calls, new grad, last fn, module tree) of the others
        self.guard = Guard(self, builder)  # what the engine calls (see the module docstring)
        self.light_steps = GradvizLight(self)  # light iterations (tracing/schedule.py)
        self.training_watch = gradviz_watch(self)  # train/eval modes (tracing/training_facts.py)
        self.optimizer_watch = gradviz_optimizers(self)  # optimizers' constructions (likewise)
        self._var_gone = self._variable_died  # the weak references' callbacks, bound once
        self._node_gone = self._node_died

    # ----- lifecycle --------------------------------------------------------------------------------------
    def attach(self):
        """Start watching: in this context, and in every thread started from now on."""
        from ....autograd.observer import attach

        self.guard.start(threading.active_count() == 1)  # (before any engine call can reach it)
        light = self.light_steps
        schedule = getattr(self.builder, "schedule", None)  # (a builder stand-in may have none: all full)
        light.enabled = schedule is not None and schedule.light
        if not light.enabled or self.builder.starts_full():
            attach(self.guard)
        else:
            light.enter()
        threads.adopt(self.guard)
        self.training_watch.install()
        self.optimizer_watch.install()

    def detach(self):
        """Stop watching, in every context the guard is attached in (its flag), and leave this context. Call
        with the builder's lock held (no callback is half way)."""
        from ....autograd.observer import detach

        self.guard.stop()
        detach(self.guard)
        self.training_watch.uninstall()
        self.optimizer_watch.uninstall()
        if self.light_steps.on:
            self.light_steps.leave()
        threads.release(self.guard)
        self._calls = [(c[0], None, None, None) for c in self._calls]  # no thread's frames held past the trace
        for ident, state in list(self._thread_states.items()):
            self._thread_states[ident] = state[:1] + ([(c[0], None, None, None) for c in state[1]],) + state[2:]

    def switch_thread(self):
        """Store the loaded thread's per-thread state and load the calling thread's (lock held)."""
        states = self._thread_states
        states[self.thread_ident] = (self._thread_ref, self._calls, self._new_grad, self._last_fn, self.names.tree)
        ident = get_ident()
        thread = current_thread()
        state = states.pop(ident, None)
        if state is None or state[0]() is not thread:  # a new thread (perhaps with an ended one's ident)
            state = (None, [], None, None, None)
        _, self._calls, self._new_grad, self._last_fn, self.names.tree = state
        self._thread_ref = weakref.ref(thread)
        self.thread_ident = ident

    def _variable_died(self, ref):
        """A reported Variable died: the builder's death notice, without its lock while the thread is alone."""
        if not self.guard.solo:
            self.builder.variable_handle_died(ref)
            return
        try:
            self.builder.variable_died(ref.key, ref)
        except Exception as exc:  # a weak reference callback: nobody to raise to
            self.builder.internal_error("variable_died", exc)

    def _node_died(self, ref):
        """A reported node died (see ``_variable_died``)."""
        if not self.guard.solo:
            self.builder.node_handle_died(ref)
            return
        try:
            self.builder.node_died(ref.key, ref)
        except Exception as exc:
            self.builder.internal_error("node_died", exc)

    def finish(self, frame):
        """The trace stops: name what the user's frame binds, and note what the live Variables are now."""
        self._name_from_frame(frame)
        self.refresh()

    def is_graph_output(self, value):
        """Whether ``value`` is a Variable with a graph behind it (what keeps that graph alive)."""
        return isinstance(value, Variable) and value._grad_fn is not None

    def refresh(self, requires_grad=True):
        """Tell the builder what live Variables are now: user-given names and (unless told not to: after the
        trace stopped, what they were at the stop stands) whether they require grad."""
        state = self.builder.variable_state
        for key, rec in list(self.builder.live_variables.items()):
            ref = rec.handle
            obj = ref() if type(ref) is _Ref else None  # (under engine="auto" the torch adapter's records too)
            if obj is None:
                continue
            state(key, name=obj._name, requires_grad=obj._requires_grad if requires_grad else None)

    def raised(self, exc, tb):
        self.builder.raised(type(exc).__name__, safe_message(exc), _raise_location(tb))

    # ----- records ----------------------------------------------------------------------------------------
    def _new_var(self, var, origin, location, node=None, module=None):
        key = id(var)
        ref = _Ref(var, self._var_gone)
        ref.key = key
        data = var._data
        dtype = data.dtype
        name = var._name
        is_param = False
        if name is None and origin != "grad" and self.names.param_names:
            name = self.names.parameter_path(var)
            is_param = name is not None
        return self.builder.variable(
            key, origin, data.shape, _dtype_names.get(dtype) or dtype_name(dtype), data.nbytes, var._requires_grad,
            location, node, name, var._volatile, _is_grad_enabled(), is_param, module, None, ref)

    def key_for_variable(self, obj):
        """``var_key`` for a Variable, None for anything else."""
        return self.var_key(obj) if isinstance(obj, Variable) else None

    def key_for_node(self, obj):
        """``node_key`` for a graph node of this engine, None for anything else."""
        return self.node_key(obj) if hasattr(obj, "next_functions") and hasattr(obj, "_next") else None

    def var_key(self, var):
        """The key of ``var``, reporting it first if it was never seen (made before the trace started)."""
        key = id(var)
        if key not in self.builder.live_variables:
            fn = var._grad_fn
            origin = "parameter" if type(var).__name__ == "Parameter" else "external"
            self._new_var(var, origin, None, None if fn is None else self.node_key(fn), ())
        return key

    def node_key(self, node):
        """The key of graph node ``node``, reporting it (and what it reaches that is unknown) first if needed."""
        key = id(node)
        if key not in self.builder.live_nodes:
            self._adopt(node)
        return key

    def _edges(self, node):
        edges = []
        live = self.builder.live_nodes
        for edge in node._next:  # next_functions, without building the tuple
            if edge is None:
                continue
            child, nr = edge
            if child is None:
                edges.append(None)
            elif type(child) is AccumulateGrad:
                edges.append((self.var_key(child.variable), LEAF))
            else:
                key = id(child)
                if key not in live:
                    self._adopt(child)
                edges.append((key, nr))
        return edges

    def _adopt(self, node):
        """A node first seen as someone's input: a CopySlices, or a node built before the trace started
        (``external``, no location); its own unknown inputs are reported too, without recursion, oldest first."""
        builder = self.builder
        pending = [node]
        order = []
        seen = {id(node)}
        while pending:
            n = pending.pop()
            order.append(n)
            for child, _ in n.next_functions:
                if child is not None and type(child) is not AccumulateGrad and id(child) not in builder.live_nodes \
                        and id(child) not in seen:
                    seen.add(id(child))
                    pending.append(child)
        order.sort(key=lambda n: getattr(n, "_seq", 0))
        for n in order:
            op, class_name, custom = _info(n)
            ref = _Ref(n, self._node_gone)
            ref.key = id(n)
            if op == "CopySlices":  # the base's new value: the base's shape, known from the node itself
                shape, dtype = n._in_meta[0]
                builder.external_node(id(n), op, class_name, custom, shape=shape, dtype=dtype_name(dtype),
                                      meta=getattr(n, "_meta", None), external=False, handle=ref)
            else:
                builder.external_node(id(n), op, class_name, custom, meta=getattr(n, "_meta", None), handle=ref)
        for n in order:
            shapes = [(m[0], dtype_name(m[1])) for m in getattr(n, "_in_meta", ()) if m is not None]
            builder.node_inputs(id(n), self._edges(n), shapes)
            builder.node_saved(id(n), self._saved(n), n._freed)

    def _saved(self, node):
        """``SavedFact``s for the node's saved tensors: each charged to the block of memory it lives in (a view
        to the array owning its memory), a parameter's storage not at all."""
        saved = node._saved
        if not saved:
            return ()
        facts = []
        live = self.builder.live_variables
        for data, counter, version, v, kind, index in saved:
            if data.__class__ is not np.ndarray:
                if not hasattr(data, "nbytes"):
                    continue  # a Python constant (an exponent, a divisor): not a tensor, nothing to version
                charge = False
            else:
                charge = True
            if v is None:
                vkey = None
            else:
                vkey = id(v)
                if vkey not in live:
                    self.var_key(v)
                base = v._base if v._base is not None else v
                if base._grad_fn is None and base._requires_grad:
                    charge = False  # a parameter's storage belongs to the model
            block = block_bytes = storage = None
            if data.__class__ is np.ndarray:
                root = data
                while root.base.__class__ is np.ndarray:
                    root = root.base
                storage = id(root)  # alive while the node holds the saved array (a view keeps its base)
                if charge:
                    block, block_bytes = storage, root.nbytes
            facts.append(_fact(SavedFact, (vkey, kind, index, data.shape, data.nbytes, version,
                                           None if counter is None else id(counter), block, block_bytes, None,
                                           storage)))
        return facts

    # ----- forward ------------------------------------------------------------------------------------------
    def on_function(self, node, inputs, outputs):
        calls = self._calls
        where = None
        if calls:
            entry = calls[-1]
            if entry[2] == self.thread_ident:
                where = entry[3]
        if where is None:
            frame = user_frame(2)
            if frame is None:
                location = None
                lasti = -1
            else:
                location = location_of(frame)
                lasti = frame.f_lasti  # tells apart two calls on one line
        else:
            location, lasti = where
        self._last_fn = type(node)
        if not node.recorded:
            self._unrecorded(node, inputs, outputs, location)
            return
        builder = self.builder
        live = builder.live_variables
        in_keys = []
        for a in inputs:
            if isinstance(a, Variable):
                key = id(a)
                if key not in live:
                    self.var_key(a)
                in_keys.append(key)
        info = _class_info.get(type(node))
        op, class_name, custom = info if info is not None else _info(node)
        edges = []  # _edges, inline
        live_nodes = builder.live_nodes
        for edge in node._next:  # next_functions, without building the tuple
            if edge is None:
                continue
            child, nr = edge
            if child is None:
                edges.append(None)
            elif type(child) is AccumulateGrad:
                leaf = child.variable
                key = id(leaf)
                if key not in live:
                    self.var_key(leaf)
                edges.append((key, LEAF))
            else:
                key = id(child)
                if key not in live_nodes:
                    self._adopt(child)
                edges.append((key, nr))
        outs = []
        gone = self._var_gone
        bad = False
        for out in outputs:
            key = id(out)
            ref = _Ref(out, gone)
            ref.key = key
            data = out._data
            dtype = data.dtype
            name = _dtype_names.get(dtype)
            outs.append(_fact(OutputFact, (key, data.shape, name if name is not None else dtype_name(dtype),
                                           data.nbytes, out._requires_grad, out._grad_fn is not node, out._name,
                                           None, ref)))
            if not bad:
                kind = dtype.kind
                if kind == "f" and data.size <= _CHUNK and data.__class__ is np.ndarray:
                    if data.size == 1:  # a loss: its value screens like the dot, without ravel and dot
                        bad = not isfinite(data.item()) and nonfinite(data)
                    else:
                        flat = data.ravel("K")  # nonfinite's first test, inline: the exact check only if it fails
                        bad = not isfinite(flat.dot(flat)) and nonfinite(data)
                elif kind in "fc" and nonfinite(data):
                    bad = True
        ref = _Ref(node, self._node_gone)
        ref.key = key = id(node)
        builder.op(key, op, class_name, custom, edges, in_keys, outs, self._saved(node) if node._saved else (),
                   location, getattr(node, "_meta", None), bad, lasti, ref)
        if bad:
            self._nonfinite_from_data(key, inputs)
        if custom:
            with builder:  # the probe runs the user's code, which may start threads: under the lock (re-entrant)
                self._check_backward(node, inputs, location)

    def _nonfinite_from_data(self, key, inputs):
        """The first NaN/Inf output: if an input that needs no gradient already held one, it came in with the data,
        and the line that made that input is named (as a light iteration names it, ``gradviz/nan``)."""
        first = self.builder.first_nonfinite
        rec = self.builder.live_nodes.get(key)
        if first is None or rec is None or first["node"] != rec.id or "data" in first:
            return
        for a in inputs:
            data = getattr(a, "_data", None)
            if isinstance(a, Variable) and not a._requires_grad and isinstance(data, np.ndarray) \
                    and data.dtype.kind in "fc" and nonfinite(data):
                found = data_line(user_frame(1), a)
                if found is not None:
                    self.builder.nonfinite_data(*found)
                return

    def _check_backward(self, node, inputs, location):
        """A user-defined Function's first application with these inputs: check its backward numerically
        (wrong-backward), on copies, with nothing observed (``gradviz/probe``)."""
        cls = type(node)
        kwargs = node._kwargs
        sig = probe_signature(inputs, kwargs)
        builder = self.builder
        if not builder.wants_backward_check(f"{cls.__module__}.{cls.__qualname__}", sig):
            return
        result = self._unlocked(run_check, cls, inputs, kwargs)
        code = getattr(cls.backward, "__code__", None)
        defined = None if code is None else location_at(code, definition_line(code))
        builder.backward_check(id(node), cls.__qualname__, sig, result, location, defined)

    def _unlocked(self, fn, *args):
        """``fn(*args)`` without the builder's lock (the user's code runs there: a Function whose forward waits
        for threads that run ops would otherwise wait for itself), then this thread's state loaded again."""
        lock = self.builder.lock
        if not lock._is_owned():  # called without the guard (a test feeding callbacks directly)
            return fn(*args)
        lock.release()
        try:
            return fn(*args)
        finally:
            self.builder.acquire()
            if self.thread_ident != get_ident():
                self.switch_thread()

    def _unrecorded(self, node, inputs, outputs, location):
        """An op that built no graph node. Its outputs matter to 'why is there no gradient' only when some
        input required grad (no_grad, volatile, a non-differentiable op); anything else is plain data."""
        if not any(isinstance(a, Variable) and a._requires_grad for a in inputs):
            return
        in_keys = [self.var_key(a) for a in inputs if isinstance(a, Variable)]
        outs = []
        for out in outputs:
            ref = _Ref(out, self._var_gone)
            ref.key = key = id(out)
            data = out._data
            outs.append(_fact(OutputFact, (key, data.shape, dtype_name(data.dtype), data.nbytes, out._requires_grad,
                                           True, out._name, None, ref)))
        self.builder.unrecorded_op(node.name(), in_keys, outs, location, grad_mode=_is_grad_enabled(),
                                   volatile=outputs[0]._volatile if outputs else False)

    def on_variable(self, variable, origin):
        if origin == "grad":  # backward made a leaf's .grad: a new Variable, no frame to walk, no name to find
            builder = self.builder
            b = builder.backward
            key = id(variable)
            ref = _Ref(variable, self._var_gone)
            ref.key = key
            data = variable._data
            dtype = data.dtype
            name = _dtype_names.get(dtype)
            builder.variable(key, "grad", data.shape, name if name is not None else dtype_name(dtype), data.nbytes,
                             variable._requires_grad, b["location"] if b is not None else None, None,
                             variable._name, variable._volatile, _is_grad_enabled(), False, None, None, ref)
            self._new_grad = ref
            return
        rec = self.builder.live_variables.get(id(variable))
        if rec is not None:
            if origin == "parameter":
                self.builder.variable_state(id(variable), is_parameter=True)
            return
        rec = self._new_var(variable, origin, location_of(user_frame(2)))
        if origin == "new" and self._cut:
            cut = self._cut.get(id(variable._data))
            if cut is not None and cut[0]() is variable._data:
                self.builder.wrapped(id(variable), cut[1])

    def on_module_call(self, module, phase, inputs=None, output=None):
        calls = self._calls
        builder = self.builder
        if phase == "enter":
            self.training_watch.call(module)
            if self.light_steps.enabled:
                self.light_steps.module_call(module, inputs)
            if calls:
                path = self.names.path(module, calls[-1][0], builder.module_stack[-1], user_frame)
            else:
                path = self.names.path(module, None, None, user_frame)
            new = self.names.take_new_parameters() if self.names.new_parameters else None
            if new:
                self._report_parameters(new)
            frame = where = None
            cls = type(module)
            own = _own_modules.get(cls)
            if own is None:
                own = _own_modules[cls] = cls.__module__.startswith("gradviz.")
            d = module.__dict__  # one attribute read: a Module's own __getattr__ makes each one slow
            if own and not d["_forward_hooks"] and not d["_forward_pre_hooks"] and "forward" not in d:
                if not calls:
                    frame = user_frame(2)
                    if frame is not None:
                        where = (location_of(frame), frame.f_lasti)
                else:
                    frame, where = calls[-1][1], calls[-1][3]
            calls.append((module, frame, self.thread_ident, where))
            builder.module_enter(id(module), path, cls.__name__)
            return
        if calls and calls[-1][0] is module:
            calls.pop()
        else:  # an exit we did not see enter (the trace started inside the call): unwind to it if it is there
            for i in range(len(calls) - 1, -1, -1):
                if calls[i][0] is module:
                    del calls[i:]
                    break
        builder.module_exit(id(module))
        if not calls:
            self.names.tree = None

    def _report_parameters(self, found):
        live = self.builder.live_variables
        names = {}
        for key, (p, path) in found.items():
            rec = live.get(key)
            if rec is not None and rec.handle is not None and rec.handle() is p:
                names[key] = path
        if names:
            self.builder.parameter_names(names)

    def name_module_tree(self, module, name):
        """Name a root module's tree (a snapshot names the modules bound in the caller's frame)."""
        self.names.name_tree(module, name)
        self._report_parameters(self.names.take_new_parameters())

    # ----- in-place, detach, hooks, .grad ------------------------------------------------------------------
    def on_inplace(self, variable, node, old_version, new_version):
        location = location_of(user_frame(2))
        vkey = self.var_key(variable)
        last = self._last_fn
        op = node.name() if node is not None else (last.name() if last is not None else None)
        nkey = base_key = base_node = None
        builder = self.builder
        if node is not None:
            nkey = self.node_key(node)
            builder.node_saved(nkey, self._saved(node), node._freed)  # the in-place path re-points saved tensors
            base = variable._base
            if base is not None and base._grad_fn is not None and base._grad_fn.name() == "CopySlices":
                base_node = self.node_key(base._grad_fn)
                base_key = self.var_key(base)
        storage = self._saved_storage_written(variable._data) if builder.saved_storages else None
        builder.inplace(vkey, old_version, new_version, id(variable._vc), location, node=nkey, op=op,
                        base=base_key, base_node=base_node, storage=storage)

    def on_parameter_update(self, optimizer, parameter, old_version, new_version):
        builder = self.builder
        if id(parameter._vc) not in builder.saved_counters:  # no live node saved this storage: nothing to predict
            return
        owner = type(optimizer).__name__ if optimizer is not None else "optimizer"
        builder.parameter_update(self.var_key(parameter), old_version, new_version, id(parameter._vc),
                                 location_of(user_frame(2)), owner)

    def on_detach(self, source, result, how):
        if is_quiet():
            return
        location = location_of(user_frame(2))
        skey = self.var_key(source)
        rkey = None
        if isinstance(result, Variable):
            rkey = id(result)
            if result is not source and rkey not in self.builder.live_variables:
                self._new_var(result, how, location)
            array = result._data
        else:
            array = result
        vid = self.builder.cut(skey, how, location, rkey)
        if hasattr(array, "__array_interface__"):
            self._remember_cut(array, vid)
            if how == "numpy" and self.builder.saved_storages and array.__class__ is np.ndarray:
                self._watch_handout(skey, array, location)

    def _saved_storage_written(self, written):
        """The storage key of ``written`` when a live node saved a value that the written elements overlap (a
        write elsewhere in the same memory changes nothing backward reads); else None."""
        storage = _storage(written)
        savers = self.builder.saved_storages.get(storage)
        if not savers:
            return None
        for rec in list(savers.values()):
            node = rec.handle() if rec.handle is not None else None
            for item in getattr(node, "_saved", None) or ():
                data = item[0]
                if data.__class__ is np.ndarray and np.may_share_memory(data, written):
                    return storage
        return None

    # ----- numpy arrays on saved memory: a write into one is seen by no engine event ------------------------------
    def _watch_handout(self, skey, array, location):
        """A numpy array on memory that live nodes saved was handed out: watch each saved value on it."""
        storage = _storage(array)
        savers = self.builder.saved_storages.get(storage)
        if savers:
            self.handouts.hand_out(skey, storage, location, _saved_on(savers, storage))

    def _remember_cut(self, array, vid):
        try:
            ref = weakref.ref(array)
        except TypeError:
            return
        self._cut[id(array)] = (ref, vid)
        if len(self._cut) > _CUT_MEMORY:
            self._cut.popitem(last=False)

    def on_hook(self, variable, hook, event, grad=None, result=None):
        if event != "call" and is_quiet():
            return
        location = location_of(user_frame(2))
        self.hook_fact(self.var_key(variable) if variable is not None else None, event, location, hook,
                       retain_grad=hook is None)

    def on_grad_read(self, variable, grad):
        if is_quiet():
            return
        frame = user_frame(2)
        key = self.var_key(variable)
        rec = self.builder.live_variables[key]
        self.builder.grad_read(key, location_of(frame), was_none=grad is None, is_leaf=variable._grad_fn is None,
                               retains_grad=variable.retains_grad, requires_grad=variable._requires_grad,
                               name=name_in_frame(frame, variable) if rec.name is None else None)

    def on_grad_write(self, variable, grad):
        if is_quiet():
            return
        self.builder.grad_write(self.var_key(variable), location_of(user_frame(2)), is_none=grad is None)

    def on_optimizer(self, optimizer, event):
        self.optimizer_watch.event(optimizer, event)  # the order of backward, zero_grad, step
        location = location_of(user_frame(2))
        groups = getattr(optimizer, "param_groups", None)
        if groups is None:  # a module's zero_grad()
            found = getattr(optimizer, "parameters", None)
            groups = [{"params": found() if found is not None else ()}]
        params = []
        live = self.builder.live_variables
        for group in groups:
            for p in group.get("params", ()):
                if isinstance(p, Variable):
                    key = id(p)
                    if key not in live:
                        self.var_key(p)
                    params.append(key)
        self.optimizer_event(event, location, optimizer, params)
        if event == "step":
            self.iteration_step()

    # ----- backward -------------------------------------------------------------------------------------------
    def on_backward_begin(self, roots, grad_roots, retain_graph, inputs):
        frame = user_frame(2)
        location = location_of(frame)
        self._name_from_frame(frame, quick=True)
        root_keys = []  # loops, not comprehensions or a generator (a frame each); keys before nodes, as reported
        for r in roots:
            root_keys.append(self.var_key(r))
        root_nodes = []
        for r in roots:
            fn = r._grad_fn
            root_nodes.append(None if fn is None else self.node_key(fn))
        gradient_none = False
        for g in grad_roots:
            if g is None:
                gradient_none = True
                break
        kind = "backward" if inputs is None else "grad"
        self.backward_started(roots, root_keys, root_nodes, location, kind=kind, retain_graph=retain_graph,
                              gradient_none=gradient_none,
                              root_fn=roots[0]._grad_fn if len(roots) == 1 and kind == "backward" else None,
                              loss=_scalar(roots) if kind == "backward" else None)

    def on_backward_step(self, node, grad_outputs, grad_inputs):
        key = id(node)
        if key not in self.builder.live_nodes:
            self._adopt(node)
        if len(grad_outputs) == 1:
            g = grad_outputs[0]
            if g is None:
                norm = 0.0
            elif g.__class__ is np.ndarray and g.size <= _CHUNK and g.dtype.kind == "f":  # norm_one, inline
                flat = g.ravel("K")
                norm = float(flat.dot(flat))
                norm = sqrt(norm) if norm >= 0 else norm
            else:
                norm = norm_one(g)
        else:
            norm = norm_of(grad_outputs)
        self.builder.backward_step(key, norm, norm != norm or norm == _INF and nonfinite_norm(norm, grad_outputs))
        if self._watch and key in self._watch:
            self.handouts.reached(key, node)

    def on_accumulate(self, variable, grad):
        key = id(variable)
        if key not in self.builder.live_variables:
            self.var_key(variable)
        made = self._new_grad
        made_key = None
        if made is not None:  # backward just made this leaf's .grad
            self._new_grad = None
            if made() is variable._grad:
                made_key = made.key
        if grad.__class__ is np.ndarray and grad.size <= _CHUNK and grad.dtype.kind == "f":  # norm_one, inline
            flat = grad.ravel("K")
            norm = float(flat.dot(flat))
            norm = sqrt(norm) if norm >= 0 else norm
        else:
            norm = norm_one(grad)
        self.builder.accumulate(key, norm, norm != norm or norm == _INF and nonfinite_norm(norm, (grad,)),
                                made_key)

    def on_buffers_freed(self, node):
        self.builder.buffers_freed(id(node))
        if self._watch and id(node) in self._watch:
            self.handouts.drop(id(node))

    def on_backward_end(self, roots, error):
        if self.builder.backward is None:
            return
        info = None
        if error is not None:
            info = {"type": type(error).__name__, "message": safe_message(error)}
            node = getattr(error, "node", None)
            if node is not None:
                info["node"] = self.node_key(node)
            for attr in ("index", "expected", "current"):
                if hasattr(error, attr):
                    info[attr] = getattr(error, attr)
            variable = getattr(error, "variable", None)
            if isinstance(variable, Variable):
                info["variable"] = self.var_key(variable)
        self.backward_finished(info)
        if error is None:
            self.iteration_backward()

    # ----- a graph that already exists ---------------------------------------------------------------------
    def describe(self, variable):
        """Report ``variable`` and the graph behind it, for a snapshot (no trace running)."""
        key = self.var_key(variable)
        fn = variable._grad_fn
        if fn is not None:
            self.builder.existing_output(key, self.node_key(fn))
