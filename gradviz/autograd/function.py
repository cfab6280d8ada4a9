"""``Function``: an op's forward and backward side by side; an applied instance is the op's graph node.

Conventions every op follows (built-in or user-defined):

- Positional arguments of ``apply`` are the op's inputs (Variables or constants such as a Python number);
  keyword arguments are parameters (``dim``, ``shape``…) and never receive gradients.
- ``backward`` returns one gradient per positional input (a bare value is accepted for a single input), None
  where there is none. A gradient may be in the broadcast shape: the engine sums it down to the input's shape.
- Save only what backward needs given ``ctx.needs_input_grad``, through ``ctx.save_for_backward``: that is what
  the engine versions, frees after backward, and what the debugger counts as a graph's memory.

Built-in ops set ``_raw = True``: their forward and backward see numpy arrays, which keeps the per-op cost low.
A user's ``Function`` subclass sees Variables, as in PyTorch, and its forward runs without recording a graph.
"""

import itertools
from operator import itemgetter

import numpy as np

from ..errors import GraphFreedError, ShapeError, StaleVersionError
from . import grad_mode, observer

_grad_enabled = grad_mode._grad_enabled
_observers = observer._observers
_sequence = itertools.count()


class SavedTensor(tuple):
    """One tensor saved for backward, with the version it had when saved (counter None: a private buffer).

    A tuple underneath: ops save one or two of these per call, and a tuple is the cheapest record to make."""

    __slots__ = ()

    def __new__(cls, data, counter, version, variable, kind, index):
        return tuple.__new__(cls, (data, counter, version, variable, kind, index))

    data = property(itemgetter(0), doc="the numpy array backward will read")
    counter = property(itemgetter(1), doc="the storage's version counter, or None for private buffers")
    version = property(itemgetter(2), doc="the version the storage had when saved")
    variable = property(itemgetter(3), doc="the input Variable it came from (None for outputs and buffers)")
    kind = property(itemgetter(4), doc='"input", "output" or "buffer"')
    index = property(itemgetter(5), doc="position among the inputs or outputs")

    @property
    def nbytes(self):
        return self[0].nbytes if isinstance(self[0], np.ndarray) else 0

    def current_version(self):
        return None if self[1] is None else self[1].value

    def __repr__(self):
        return f"SavedTensor(kind={self[4]!r}, index={self[5]}, version={self[2]})"


class Function:
    """Base class of every op, and of user-defined differentiable functions (as ``torch.autograd.Function``)."""

    _raw = False  # built-ins: forward/backward receive numpy arrays
    _relays_grads = False  # True: backward hands on gradients another node's backward made (CopySlices)
    _view = False  # the output may share storage with input 0 (a view op)
    _differentiable = True  # False: comparisons, argmax… never record a node
    recorded = False
    _freed = False
    _saved = None
    _n_saved = 0
    _to_save = ()
    _non_differentiable = ()
    _pre_hooks = None
    _retain = None
    _next = ()
    _in_meta = ()
    _n_outputs = 1
    _kwargs = {}

    # ----- the ctx API (PyTorch's names) -------------------------------------------------------------
    def save_for_backward(self, *tensors):
        self._to_save = tensors

    def mark_non_differentiable(self, *outputs):
        self._non_differentiable = outputs

    def mark_dirty(self, *tensors):
        """Accepted for compatibility; gradviz's in-place path tracks dirtiness itself."""

    @property
    def saved_tensors(self):
        saved = self._saved
        if saved is None:
            if self._freed and self._n_saved:
                raise GraphFreedError(self)
            return ()
        for data, counter, version, _, kind, index in saved:
            if counter is not None and counter.value != version:
                raise StaleVersionError(self, index, data.shape, data.dtype, version, counter.value,
                                        kind == "output")
        if self._raw:
            return tuple([s[0] for s in saved])
        return tuple(s.variable if s.variable is not None else _wrap_saved(s) for s in saved)

    # ----- graph-node introspection (what the debugger reads) ----------------------------------------
    @classmethod
    def name(cls):
        """PyTorch's node name without the numeric suffix: ``MulBackward``, ``AccumulateGrad``."""
        return cls.__name__ + "Backward"

    @property
    def next_functions(self):
        """``(node, output_nr)`` per Variable input; ``(None, 0)`` for inputs that do not require grad."""
        return tuple(e for e in self._next if e is not None)

    @property
    def saved(self):
        """The saved tensors as ``SavedTensor`` records (empty once freed)."""
        return self._saved or ()

    @property
    def freed(self):
        return self._freed

    @property
    def sequence_nr(self):
        return self._seq

    def metadata(self):
        """Small dict of extra fields a renderer may show (axis, shape…). Ops override ``_meta``."""
        return dict(self._meta) if getattr(self, "_meta", None) else {}

    def _out_meta(self, index):
        return self._outs_meta[index]

    def register_prehook_for_output(self, output_nr, fn, handle):
        if self._pre_hooks is None:
            self._pre_hooks = {}
        self._pre_hooks.setdefault(output_nr, []).append((handle, fn))

    def release(self):
        """Free the saved tensors (backward without ``retain_graph`` does this)."""
        if self._saved is not None or not self._freed:
            self._saved = None
            self._freed = True
            obs = _observers.get()
            if obs:
                for o in obs:
                    try:
                        o.on_buffers_freed(self)
                    except Exception as failure:
                        o.callback_failed("on_buffers_freed", failure)

    def __repr__(self):
        return f"<{self.name()}>"

    # ----- running ----------------------------------------------------------------------------------
    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("a Function subclass must define forward(ctx, ...)")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("a Function subclass must define backward(ctx, ...)")

    @classmethod
    def apply(cls, *args, **kwargs):
        ctx = _new(cls)
        requires = volatile = False
        raw = []
        grad_on = cls._differentiable and _grad_enabled.get()
        if grad_on:
            # One pass: the raw arrays, and what a graph node needs should this op be recorded.
            needs = []
            edges = []
            meta = []
            for a in args:
                if isinstance(a, Variable):
                    if a._base is not None and a._view_version != a._vc.value:
                        _refresh_view_history(a)  # its base was written in place: it may require grad only now
                    d = a._data
                    raw.append(d)
                    meta.append((d.shape, d.dtype))
                    if a._volatile:
                        volatile = True
                    if a._requires_grad:
                        requires = True
                        needs.append(True)
                        fn = a._grad_fn
                        edges.append((fn, a._output_nr) if fn is not None else (a._accumulator(), 0))
                    else:
                        needs.append(False)
                        edges.append(_NO_EDGE)
                else:
                    raw.append(a)
                    needs.append(False)
                    edges.append(None)
                    meta.append(None)
        else:
            for a in args:
                if isinstance(a, Variable):
                    raw.append(a._data)
                    if a._volatile:
                        volatile = True
                else:
                    raw.append(a)
        record = requires and not volatile
        if record:
            ctx.needs_input_grad = tuple(needs)
        else:
            ctx.needs_input_grad = _NO_NEEDS[len(args)] if len(args) < 8 else (False,) * len(args)

        if cls._raw:
            result = cls.forward(ctx, *raw, **kwargs)
        else:
            token = _grad_enabled.set(False)
            try:
                result = cls.forward(ctx, *args, **kwargs)
            finally:
                _grad_enabled.reset(token)

        if type(result) is np.ndarray and not ctx._non_differentiable:
            out = Variable.__new__(Variable)
            out._init(result)
            if volatile:
                out._volatile = True
            if record and result.dtype.kind in "fc":
                out._requires_grad = True
                out._grad_fn = ctx
            outputs = (out,)
            multi = False
        else:
            multi = isinstance(result, tuple)
            results = result if multi else (result,)
            outputs = tuple([_make_output(ctx, r, i, record, volatile) for i, r in enumerate(results)])
        if record:
            ctx.recorded = True
            ctx._seq = next(_sequence)
            ctx._next = tuple(edges)
            ctx._in_meta = tuple(meta)
            if multi:
                ctx._n_outputs = len(outputs)
                ctx._outs_meta = tuple([(o._data.shape, o._data.dtype) for o in outputs])
            if ctx._to_save:
                ctx._saved = _versioned(ctx._to_save, args, raw, outputs)
                ctx._n_saved = len(ctx._saved)
            if cls._view:
                _mark_views(outputs, multi, args[0], cls, kwargs)
        else:
            ctx._to_save = ()
            if cls._view and isinstance(args[0], Variable):
                _mark_views(outputs, multi, args[0], cls, kwargs)
        if kwargs:
            ctx._kwargs = kwargs
        obs = _observers.get()
        if obs:
            for o in obs:
                try:
                    o.on_function(ctx, args, outputs)
                except Exception as failure:
                    o.callback_failed("on_function", failure)
        return outputs if multi else outputs[0]


_NO_EDGE = (None, 0)


_tuple_new = tuple.__new__
_NO_NEEDS = tuple((False,) * n for n in range(8))
_new = object.__new__


def _make_output(ctx, value, index, record, volatile):
    """Wrap one forward result as a Variable; attach the node when it is differentiable."""
    if isinstance(value, Variable):  # a user Function returned a Variable
        data = value._data
    else:
        data = value if type(value) is np.ndarray else np.asarray(value)
    out = Variable.__new__(Variable)
    out._init(data)
    if volatile:
        out._volatile = True
    if record and data.dtype.kind in "fc" and not _is_marked(ctx, value):
        out._requires_grad = True
        out._grad_fn = ctx
        out._output_nr = index
    return out


def _is_marked(ctx, value):
    marked = ctx._non_differentiable
    return bool(marked) and any(m is value for m in marked)


def _edge(var):
    """The (node, output_nr) a gradient for ``var`` flows into, or (None, 0) if it needs none."""
    if var._base is not None and var._view_version != var._vc.value:
        _refresh_view_history(var)
    if not var._requires_grad:
        return _NO_EDGE
    fn = var._grad_fn
    if fn is not None:
        return (fn, var._output_nr)
    return (var._accumulator(), 0)


def _versioned(to_save, args, raw, outputs):
    """Turn what forward saved into SavedTensor records, recording each storage's version."""
    records = []
    for item in to_save:
        if item.__class__ is np.ndarray:
            data = item
        elif isinstance(item, Variable):
            data = item._data
        else:
            # None or a Python constant: nothing to version, nothing in memory worth counting.
            records.append(_tuple_new(SavedTensor, (item, None, 0, None, "buffer", len(records))))
            continue
        for i, d in enumerate(raw):
            if d is data and isinstance(args[i], Variable):
                a = args[i]
                records.append(_tuple_new(SavedTensor, (data, a._vc, a._vc.value, a, "input", i)))
                break
        else:
            for i, o in enumerate(outputs):
                if o._data is data:
                    records.append(_tuple_new(SavedTensor, (data, o._vc, o._vc.value, None, "output", i)))
                    break
            else:
                if isinstance(item, Variable):
                    records.append(_tuple_new(SavedTensor, (data, item._vc, item._vc.value, item, "input", -1)))
                else:
                    records.append(_tuple_new(SavedTensor, (data, None, 0, None, "buffer", len(records))))
    return tuple(records)


def _wrap_saved(saved):
    if saved.data is None:
        return None
    v = Variable.__new__(Variable)
    v._init(saved.data)
    return v


# ----- views ------------------------------------------------------------------------------------------
def _mark_views(outputs, multi, source, cls, kwargs):
    """A view op's outputs share ``source``'s storage; an op returning several views (split, unbind) says, per
    output, which single-view op gives that output (``output_view``), so each view can be replayed alone."""
    if not multi:
        _mark_view(outputs[0], source, cls, kwargs)
        return
    for i, out in enumerate(outputs):
        _mark_view(out, source, *cls.output_view(i, kwargs))


def _mark_view(out, source, cls, kwargs):
    """Make ``out`` share ``source``'s version counter when it really shares its memory."""
    if out._data.size and not np.may_share_memory(out._data, source._data):  # empty: a view, as in PyTorch
        return
    base = source._base if source._base is not None else source
    out._base = base
    out._vc = source._vc
    out._view_chain = source._view_chain + ((cls, kwargs),)
    out._view_version = out._vc.value


def multi_view_message(chain, what):
    """PyTorch's refusal for a view made by an op that returns several views (split, chunk, unbind)."""
    cls, kwargs = chain[-1]
    multi = getattr(cls, "_multi_view", None)
    name = multi or cls.name()[:-len("Backward")]
    return (f"Output {kwargs.get('piece', 0) if multi else 0} of {name} is a view and {what}. This view is the "
            "output of a function that returns multiple views. Such functions do not allow the output views to be "
            "modified inplace. You should replace the inplace operation by an out-of-place one.")


def view_of(array, chain):
    """Apply a view chain (as recorded on a view Variable) to a numpy array of its base's shape."""
    for cls, kwargs in chain:
        array = cls.view(array, **kwargs)
    return array


def _refresh_view_history(view):
    """The base changed in place since ``view`` took its history: rebuild it from the base's current one."""
    if not _grad_enabled.get():
        return  # stays stale: rebuilt when grad mode is back on
    base = view._base
    if base._requires_grad and any(getattr(cls, "_multi_view", None) for cls, _ in view._view_chain):
        raise RuntimeError(multi_view_message(view._view_chain, "its base or another view of its base has been "
                                                                "modified inplace"))
    view._view_version = view._vc.value
    if not base._requires_grad:
        return
    v = base
    for cls, kwargs in view._view_chain:
        v = cls.apply(v, **kwargs)
    view._grad_fn = v._grad_fn
    view._output_nr = v._output_nr
    view._requires_grad = v._requires_grad


class AccumulateGrad(Function):
    """The node that receives a leaf's gradient and adds it into ``leaf.grad``."""

    _raw = True
    recorded = True

    def __init__(self, variable):
        self.variable = variable
        self._seq = next(_sequence)
        self._next = ()
        self._in_meta = ()

    @classmethod
    def name(cls):
        return "AccumulateGrad"


class CopySlices(Function):
    """An in-place op through a view rewrote part of the base: route the base's gradient around it."""

    _raw = True
    _relays_grads = True
    recorded = True

    def __init__(self, base, node, chain):
        self.node = node
        self.chain = chain
        self._seq = next(_sequence)
        self._next = (_edge(base),) + node._next[1:]
        self._in_meta = ((base._data.shape, base._data.dtype),) + node._in_meta[1:]
        self.needs_input_grad = (base._requires_grad,) + node.needs_input_grad[1:]

    @classmethod
    def name(cls):
        return "CopySlices"

    # The wrapped write's saved tensors are this node's: shown here, and freed with it (as PyTorch's
    # CopySlices releases its wrapped function's variables), so a second backward fails as it should.
    @property
    def saved(self):
        return self.node.saved

    @property
    def _freed(self):
        return self.node._freed

    @_freed.setter
    def _freed(self, value):
        if value:
            self.node.release()

    @staticmethod
    def backward(ctx, grad):
        result = np.array(grad, copy=True)
        region = view_of(result, ctx.chain)
        if 0 in region.strides and any(st == 0 and n > 1 for st, n in zip(region.strides, region.shape)):
            # fill_ through an expanded view: forward is fine, the gradient cannot be routed (as in PyTorch).
            raise RuntimeError("unsupported operation: more than one element of the written-to tensor refers to "
                               "a single memory location. Please clone() the tensor before performing the "
                               "operation.")
        inner = _call_backward(ctx.node, (np.array(region, copy=True),))
        first = inner[0] if inner else None
        region[...] = 0 if first is None else _sum_to_shape(first, region.shape, ctx.node, 0)
        return (result,) + tuple(inner[1:])


def _call_backward(node, grads):
    """Run one node's backward and return its gradients as a tuple aligned with its positional inputs."""
    if node._raw:
        out = node.backward(node, *grads)
    else:
        wrapped = [None if g is None else _wrap_array(g) for g in grads]
        token = _grad_enabled.set(False)
        try:
            out = node.backward(node, *wrapped)
        finally:
            _grad_enabled.reset(token)
        out = tuple(o._data if isinstance(o, Variable) else o for o in (out if isinstance(out, tuple)
                                                                          else (out,)))
    if not isinstance(out, tuple):
        out = (out,)
    if len(out) != len(node._next):
        out = _check_count(node, out)
    return out


def _check_count(node, out):
    """Backward returned the wrong number of gradients: trailing Nones are forgiven, anything else is an error."""
    expected = len(node._next)
    if len(out) > expected and all(o is None for o in out[expected:]):
        return out[:expected]
    raise RuntimeError(f"function {node.name()} returned an incorrect number of gradients "
                       f"(expected {expected}, got {len(out)})")


def _wrap_array(array):
    v = Variable.__new__(Variable)
    v._init(array if isinstance(array, np.ndarray) else np.asarray(array))
    return v


def _sum_to_shape(grad, shape, node, index):
    """Reduce a gradient computed in the broadcast shape down to its input's shape."""
    if type(grad) is not np.ndarray:
        grad = np.asarray(grad)
    gshape = grad.shape
    if gshape == shape:
        return grad
    lead = len(gshape) - len(shape)
    if lead >= 0 and all(s == 1 or s == g for s, g in zip(shape, gshape[lead:])):
        axes = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(shape)
                                          if s == 1 and gshape[lead + i] != 1)
        return grad.sum(axis=axes, keepdims=False).reshape(shape) if axes else grad.reshape(shape)
    if grad.size == 1 and lead < 0:
        return np.broadcast_to(grad.reshape(()), shape)
    raise ShapeError(f"Function {node.name()} returned an invalid gradient at index {index} - got "
                     f"{list(gshape)} but expected shape compatible with {list(shape)}")


# Imported last: variable.py imports this module's Function for its methods' ops.
from .variable import Variable  # noqa: E402
