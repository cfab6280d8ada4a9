"""``Trace``: an observer that records the engine's activity as plain data, cheaply enough to leave on.

Per op it does one cached frame walk, one record per output and per node (each record is itself a weak
reference to its object), and one reduction for the NaN/Inf check. Graphs are grouped by structure at each
iteration boundary, and full records are kept only for a bounded window of iterations (see ``grouping.py``).
"""

import itertools
import sys
import weakref
from collections import OrderedDict
from threading import get_ident

import numpy as np

from ..autograd import grad_mode
from ..autograd.function import AccumulateGrad as _AccumulateGrad
from ..autograd.observer import Observer, attach, detach
from ..autograd.variable import Variable
from ..document.vocabulary import error_code
from ..optim.optimizer import bump_version as _bump_version
from .frames import (
    _CO_OPTIMIZED,
    _internal,
    _is_internal,
    _locals,
    location_at,
    location_of,
    name_in_frame,
    name_in_frames,
    names_in_frame,
    user_frame,
)
from .grouping import Grouping
from .records import (
    NodeRecord,
    VarRecord,
    _dtype_names,
    dtype_name,
    nonfinite,
    nonfinite_norm,
    norm_of,
    norm_one,
)

_is_grad_enabled = grad_mode.is_grad_enabled
_INF = float("inf")
_BUMP_CODE = _bump_version.__code__  # optimizers report parameter updates through it
_NO_EDGE = (None, 0)
_ACCUMULATE_INFO = ("AccumulateGrad", "AccumulateGrad", False)
_class_info = {}  # Function class -> (node name, class name, user-defined?)
_own_modules = {}  # Module class -> whether gradviz defines it (its forward calls no user code)
_CUT_MEMORY = 256  # how many recently cut arrays (.data/.detach/.numpy) are remembered to spot re-wrapping


def _caller_is_internal(depth):
    """Whether the code that called into the engine (``depth`` frames up) is gradviz itself (an optimizer…)."""
    code = sys._getframe(depth + 1).f_code
    flag = _internal.get(code)
    return _is_internal(code) if flag is None else flag


def _raise_location(tb):
    """The innermost user frame of a traceback (where the user's code raised or called into gradviz)."""
    found = None
    while tb is not None:
        code = tb.tb_frame.f_code
        flag = _internal.get(code)
        if not (_is_internal(code) if flag is None else flag):
            found = (code, tb.tb_lineno)
        tb = tb.tb_next
    return None if found is None else location_at(*found)


class _ModuleTree:
    """A root module (one the user's code called directly), the name the calling code gave it, and the paths of
    the modules in its tree (from ``named_modules()``, walked once and again only when the tree changed)."""

    __slots__ = ("ref", "name", "paths", "outside")

    def __init__(self, root, name):
        self.ref = weakref.ref(root)
        self.name = name
        self.paths = {}  # id(module) -> _ModuleName
        self.outside = set()  # ids of modules called under this root that are not in its tree

    def path_of(self, module):
        entry = self.paths.get(id(module))
        return entry.path if entry is not None and entry.valid(module) else None


class _ModuleName(weakref.ref):
    """A module's path in its root's tree, and the attribute names leading to it (to check it still does)."""

    __slots__ = ("path", "tree", "parts", "parent_path")

    def __new__(cls, module, path, tree, parts):
        return super().__new__(cls, module)

    def __init__(self, module, path, tree, parts):
        super().__init__(module)
        self.path = path
        self.tree = tree
        self.parts = parts
        self.parent_path = path.rpartition(".")[0] if parts else None

    def valid(self, module):
        """Still this module, still reached from the root by the same attribute names (a few dict lookups)."""
        if self() is not module:
            return False
        m = self.tree.ref()
        for part in self.parts:
            children = getattr(m, "_modules", None)
            if children is None:  # a module-like object that does not say: trust its named_modules()
                return True
            m = children.get(part)
        return m is module


class Trace(Observer):
    """Record every Variable, graph node, backward call and notable event while active.

    ``with gradviz.trace() as tr: ...`` or ``tr = gradviz.trace(); tr.start(); ...; tr.stop()``. Read the result
    with ``tr.to_dict()`` / ``tr.to_json(path)``, ``tr.memory``, ``tr.diagnostics``, ``tr.why_none(variable)``.
    ``window`` is how many iterations are kept in full at the start and at the end of a long loop.
    """

    def __init__(self, window=3):
        self.window = window
        self.active = False
        self.stopped = False
        self.script = None
        self.exception = None  # what ended the traced block, if it raised
        self._vars = {}  # record id -> VarRecord (the document's; dropped records leave this table)
        self._nodes = {}  # record id -> NodeRecord
        self._live_vars = {}  # id(Variable) -> VarRecord, while the Variable lives
        self._live_nodes = {}  # id(node) -> NodeRecord, while the node lives
        self._var_ids = itertools.count()
        self._node_ids = itertools.count()
        self._event_ids = itertools.count()
        self._seq = itertools.count()  # one order shared by events and backward calls
        self.events = {}  # event id -> dict
        self.backwards = {}  # backward id -> dict
        self._backward = None  # the backward call in progress
        self._visited = self._grad_norms = None  # its "visited" list and "grad_norms" dict
        self._stack = ()  # module call stack: paths, outermost first
        # (module, the stack before it was entered, the user frame that called the outermost module when every
        # module in the call stack is gradviz's own (else None), the thread), innermost last. Frames are held
        # only while their call runs, and dropped at stop.
        self._calls = []
        self._module_names = {}  # id(module) -> _ModuleName: the first path each module was given
        self._trees = {}  # id(root module) -> _ModuleTree
        self._tree = None  # the _ModuleTree of the root module being called
        self.modules = {}  # path -> class name, for every module call seen
        self._param_names = {}  # id(parameter) -> (weakref, path)
        self._savers = {}  # id(version counter) -> [NodeRecord] of nodes that saved that storage
        self._global_names = {}  # id(globals dict) -> (its size, names bound to Variables) at the last full pass
        self._cut = OrderedDict()  # id(array) -> (weakref to the array, variable id it was cut from)
        self._last_grad_read = None
        self._new_grad = None
        self._last_fn = None
        self._lasti = -1
        self.first_nonfinite = None
        self.internal_errors = []
        self.groups = Grouping(self)

    # ----- lifecycle ------------------------------------------------------------------------------------
    def start(self):
        if not self.active:
            attach(self)
            self.active = True
            self.stopped = False
        return self

    def stop(self):
        if self.active:
            detach(self)
            self._calls = [(m, stack, None, None) for m, stack, _, _ in self._calls]
            self.active = False
            self.stopped = True
            self._name_from_frame(user_frame(2))
            self.groups.freeze()
            for rec in self._live_vars.values():  # what the script left them at (a parameter frozen later)
                obj = rec()
                if obj is not None:
                    rec.requires_grad_final = obj._requires_grad
        return self

    def __enter__(self):
        return self.start()

    def __exit__(self, exc_type, exc, tb):
        if exc is not None:  # a summary only: the exception's traceback would keep the user's frames alive
            self.exception = {"type": type(exc).__name__, "message": str(exc).split("\n")[0],
                              "location": _raise_location(tb)}
        self.stop()
        return False

    # ----- records ----------------------------------------------------------------------------------------
    def _var_died(self, rec):
        live = self._live_vars
        if live.get(rec.key) is rec:
            del live[rec.key]

    def _node_died(self, rec):
        live = self._live_nodes
        if live.get(rec.key) is rec:
            del live[rec.key]
        rec.alive = False
        if rec.owners:
            self._release(rec)
        if rec.counters:
            self._forget_savers(rec)
        graph = rec.graph
        if graph is not None:
            while graph.parent is not None:
                graph = graph.parent
            graph.alive -= 1
            if graph.alive == 0:
                self.groups.graphs_alive -= 1

    def _new_var(self, var, origin, location, node=None):
        rec = VarRecord(var, self._var_died)
        rec.id = vid = next(self._var_ids)
        rec.key = key = id(var)
        data = var._data
        rec.shape = data.shape
        dtype = data.dtype
        name = _dtype_names.get(dtype)
        rec.dtype = name if name is not None else dtype_name(dtype)
        rec.nbytes = data.nbytes
        rec.requires_grad = var._requires_grad
        rec.is_leaf = node is None
        rec.is_parameter = origin == "parameter"
        rec.origin = origin
        rec.node = node
        rec.accumulator = rec.source = rec.graph = rec.op = rec.inputs = None
        rec.volatile = var._volatile
        rec.grad_mode = _is_grad_enabled()
        rec.module = self._stack
        rec.location = location
        groups = self.groups
        rec.iteration = groups.iteration
        rec.pinned = False
        name = var._name
        if name is None and self._param_names:
            entry = self._param_names.get(key)
            if entry is not None and entry[0]() is var:
                name = entry[1]
                rec.is_parameter = True
        rec.name = name
        self._live_vars[key] = rec
        self._vars[vid] = rec
        groups.iter_vars.append(rec)
        return rec

    def _grad_record(self, var):
        """``_new_var`` for a ``.grad`` that backward made (on_accumulate, next, says whose): located at the
        backward call, with no frame walk."""
        b = self._backward
        return self._new_var(var, "grad", b["location"] if b is not None else None)

    def _var_record(self, var):
        """The record of ``var``, made on first sight for Variables created before the trace started."""
        rec = self._live_vars.get(id(var))
        if rec is None:
            fn = var._grad_fn
            origin = "parameter" if type(var).__name__ == "Parameter" else "external"
            rec = self._new_var(var, origin, None, None if fn is None else self._node_record(fn).id)
            rec.module = ()  # made before the trace: no module call stack is known
        return rec

    def _node_record(self, node):
        rec = self._live_nodes.get(id(node))
        return rec if rec is not None else self._adopt(node)

    def _new_node(self, node, location, module):
        rec = NodeRecord(node, self._node_died)
        rec.id = nid = next(self._node_ids)
        rec.key = key = id(node)
        cls = type(node)
        info = _class_info.get(cls)
        if info is None:
            info = _class_info[cls] = (node.name(), cls.__name__, not cls.__module__.startswith("gradviz."))
        rec.op, rec.class_name, rec.custom = info
        rec.location = location
        rec.module = module
        rec.iteration = self.groups.iteration
        rec.inputs = rec.input_variables = rec.outputs = rec.saved = rec.shape = ()
        rec.variable = rec.graph = rec.freed_by = rec.nonfinite = rec.owners = rec.counters = rec.dtype = None
        rec.meta = getattr(node, "_meta", None)
        rec.external = False
        rec.alive = True
        self._live_nodes[key] = rec
        self._nodes[nid] = rec
        return rec

    def _link_inputs(self, rec, node):
        """Fill ``inputs`` from the node's edges; returns the input node records (to place the graph)."""
        children = []
        inputs = []
        live = self._live_nodes
        for edge in node._next:  # next_functions, without building the tuple
            if edge is None:
                continue
            child, nr = edge
            if child is None:
                inputs.append(_NO_EDGE)
                continue
            crec = live.get(id(child))
            if crec is None:
                crec = self._accumulator_record(child) if type(child) is _AccumulateGrad else self._adopt(child)
            inputs.append((crec.id, nr))
            children.append(crec)
        rec.inputs = tuple(inputs)
        return children

    def _adopt(self, node):
        """A node first seen as someone's input: a leaf's AccumulateGrad, a CopySlices, or a node built before
        the trace started (``external``, no location; its own inputs are adopted too, without recursion)."""
        if type(node) is _AccumulateGrad:
            return self._accumulator_record(node)
        pending = [node]
        order = []
        seen = {id(node)}
        while pending:
            n = pending.pop()
            order.append(n)
            for child, _ in n.next_functions:
                if child is not None and id(child) not in self._live_nodes and id(child) not in seen:
                    seen.add(id(child))
                    pending.append(child)
        order.sort(key=lambda n: getattr(n, "_seq", 0))
        made = []
        for n in order:
            if type(n) is _AccumulateGrad:
                self._accumulator_record(n)
                continue
            rec = self._new_node(n, None, ())
            rec.external = n.name() != "CopySlices"
            if not rec.external:  # the base's new value: the base's shape, known from the node itself
                shape, dtype = n._in_meta[0]
                rec.shape, rec.dtype = shape, dtype_name(dtype)
            made.append((rec, n))
        for rec, n in made:
            self._link_inputs(rec, n)
            self._fill_input_shapes(rec, n)
            self._record_saved(rec, n)
        return self._node_record(node)

    def _accumulator_record(self, node):
        """A leaf's AccumulateGrad: one record per leaf, shared by every graph that uses the leaf. The engine
        makes a new AccumulateGrad node for a parameter each iteration (once the old graph is gone); they all
        stand for the same thing, so the record refers to the leaf (it lives as long as the leaf) and is found
        through it: no record to make, and none to drop, per parameter per iteration."""
        leaf = node.variable
        lrec = self._live_vars.get(id(leaf))
        if lrec is None:
            lrec = self._var_record(leaf)
        acc = lrec.accumulator
        if acc is not None:
            rec = self._nodes.get(acc)
            if rec is not None and rec.alive:
                return rec
        rec = NodeRecord(leaf, self._accumulator_died)
        rec.id = nid = next(self._node_ids)
        rec.key = None
        rec.op, rec.class_name, rec.custom = _ACCUMULATE_INFO
        rec.location = rec.graph = rec.freed_by = rec.nonfinite = rec.owners = rec.counters = rec.meta = None
        rec.module = rec.inputs = rec.input_variables = rec.outputs = rec.saved = ()
        rec.iteration = self.groups.iteration
        rec.external = False
        rec.alive = True
        rec.variable = lrec.id
        rec.shape = lrec.shape
        rec.dtype = lrec.dtype
        lrec.accumulator = nid
        self._nodes[nid] = rec
        return rec

    @staticmethod
    def _accumulator_died(rec):
        rec.alive = False

    def _fill_input_shapes(self, rec, node):
        """A node's output shape is what its consumers expected as input: fill adopted nodes' shapes."""
        metas = [m for m in getattr(node, "_in_meta", ()) if m is not None]
        for (child_id, _), meta in zip(rec.inputs, metas):
            child = self._nodes.get(child_id) if child_id is not None else None
            if child is not None and child.dtype is None:
                child.shape, child.dtype = meta[0], dtype_name(meta[1])

    def _record_saved(self, rec, node):
        """Saved-tensor descriptions, and what they hold in memory (charged to the graph while alive): each
        distinct block once, a view charged to the array owning its memory, parameters' storage not at all."""
        if rec.owners:
            self._release(rec)
        if rec.counters:
            self._forget_savers(rec)
        saved = node._saved
        if not saved:
            rec.saved = ()
            return
        items = []
        owners = {}
        live = self._live_vars
        savers = self._savers
        counters = None
        for data, counter, version, v, kind, index in saved:
            if data.__class__ is not np.ndarray:
                if not hasattr(data, "nbytes"):
                    continue  # a Python constant (an exponent, a divisor): not a tensor, nothing to version
                charge = False
            else:
                charge = True
            if v is None:
                vid = None
            else:
                vrec = live.get(id(v))
                vid = (vrec if vrec is not None else self._var_record(v)).id
                base = v._base if v._base is not None else v
                if base._grad_fn is None and base._requires_grad:
                    charge = False  # a parameter's storage belongs to the model
            items.append((vid, kind, index, data.shape, data.nbytes, version))
            if charge:
                root = data
                while root.base.__class__ is np.ndarray:
                    root = root.base
                owners[id(root)] = root.nbytes
            if counter is not None:
                c = id(counter)
                if counters is None:
                    counters = [c]
                else:
                    counters.append(c)
                entry = savers.get(c)
                if entry is None:
                    savers[c] = {rec.id: rec}
                else:
                    entry[rec.id] = rec
        rec.saved = tuple(items)
        if owners and not node._freed:
            owners = rec.owners = tuple(owners.items())
            groups = self.groups
            groups.memory.hold(owners)
            if rec.graph is not None:
                groups.charge(rec.graph, owners)
        if counters is not None:
            rec.counters = counters

    def _release(self, rec):
        owners = rec.owners
        if owners:
            rec.owners = None
            self.groups.memory.release(owners)

    def _forget_savers(self, rec):
        counters = rec.counters
        if counters:
            rec.counters = None
            savers = self._savers
            for c in counters:
                entry = savers.get(c)
                if entry is not None:
                    entry.pop(rec.id, None)
                    if not entry:
                        del savers[c]

    # ----- forward ------------------------------------------------------------------------------------------
    def on_function(self, node, inputs, outputs):
        calls = self._calls
        if calls:
            entry = calls[-1]
            frame = entry[2]
            if frame is None or entry[3] != get_ident():
                frame = user_frame(2)
        else:
            frame = user_frame(2)
        if frame is None:
            location = None
            self._lasti = -1
        else:
            location = location_at(frame.f_code, frame.f_lineno)
            self._lasti = frame.f_lasti  # tells apart two calls on one line
        self._last_fn = type(node)
        if not node.recorded:
            self._unrecorded(node, inputs, outputs, location)
            return
        live = self._live_vars
        in_ids = []
        for a in inputs:
            if isinstance(a, Variable):
                vrec = live.get(id(a))
                in_ids.append((vrec if vrec is not None else self._var_record(a)).id)
        rec = NodeRecord(node, self._node_died)  # _new_node, inline: each field written once
        rec.id = nid = next(self._node_ids)
        rec.key = key = id(node)
        cls = type(node)
        info = _class_info.get(cls)
        if info is None:
            info = _class_info[cls] = (node.name(), cls.__name__, not cls.__module__.startswith("gradviz."))
        rec.op, rec.class_name, rec.custom = info
        rec.location = location
        rec.module = self._stack
        rec.variable = rec.freed_by = rec.nonfinite = rec.owners = rec.counters = rec.graph = None
        rec.meta = getattr(node, "_meta", None)
        rec.external = False
        rec.alive = True
        self._live_nodes[key] = rec
        self._nodes[nid] = rec
        children = self._link_inputs(rec, node)
        rec.input_variables = in_ids = tuple(in_ids)
        groups = self.groups
        graph = groups.place(rec, children)
        op = rec.op
        out_ids = []
        output_bytes = 0
        stack = self._stack
        it = groups.iteration
        new_id = self._var_ids
        died = self._var_died
        live_vars = self._live_vars
        all_vars = self._vars
        for out in outputs:  # _new_var, unrolled: an op's outputs are the most common records by far
            orec = VarRecord(out, died)
            orec.id = vid = next(new_id)
            orec.key = key = id(out)
            data = out._data
            orec.shape = data.shape
            dtype = data.dtype
            name = _dtype_names.get(dtype)
            orec.dtype = name if name is not None else dtype_name(dtype)
            orec.nbytes = nbytes = data.nbytes
            orec.requires_grad = out._requires_grad
            orec.is_leaf = out._grad_fn is not node
            orec.node = None if orec.is_leaf else nid
            orec.is_parameter = orec.pinned = orec.volatile = False
            orec.grad_mode = True  # a recorded op ran with grad mode on
            orec.origin = "op"
            orec.accumulator = orec.source = None
            orec.name = out._name
            orec.op = op
            orec.inputs = in_ids
            orec.graph = graph
            orec.module = stack
            orec.location = location
            orec.iteration = it
            live_vars[key] = orec
            all_vars[vid] = orec
            out_ids.append(vid)
            output_bytes += nbytes
        rec.outputs = tuple(out_ids)
        first = outputs[0]._data
        rec.shape = first.shape
        dtype = first.dtype
        name = _dtype_names.get(dtype)
        rec.dtype = name if name is not None else dtype_name(dtype)
        graph.output_bytes += output_bytes
        self._record_saved(rec, node)
        if dtype.kind in "fc":
            for out in outputs:
                if nonfinite(out._data):
                    self._nonfinite(rec, "forward")
                    break

    def _unrecorded(self, node, inputs, outputs, location):
        """An op that built no graph node. Its outputs matter to 'why is there no gradient' only when some
        input required grad (no_grad, volatile, a non-differentiable op); anything else is plain data."""
        if not any(isinstance(a, Variable) and a._requires_grad for a in inputs):
            return
        in_ids = tuple([self._var_record(a).id for a in inputs if isinstance(a, Variable)])
        op = node.name()
        for out in outputs:
            orec = self._new_var(out, "op", location)
            orec.op = op
            orec.inputs = in_ids

    def _nonfinite(self, rec, phase):
        if rec.nonfinite is None:
            rec.nonfinite = phase
        if self.first_nonfinite is None:
            self.first_nonfinite = {"node": rec.id, "phase": phase, "iteration": self.groups.iteration,
                                    "backward": None if self._backward is None else self._backward["id"]}
            self.groups.pin_node(rec)

    def on_variable(self, variable, origin):
        if origin == "grad":  # backward made a leaf's .grad: a new Variable, no frame to walk, no name to find
            self._new_grad = self._grad_record(variable)
            return
        rec = self._live_vars.get(id(variable))
        if rec is not None:
            if origin == "parameter":
                rec.is_parameter = True
            return
        rec = self._new_var(variable, origin, location_of(user_frame(2)))
        if origin == "new" and self._cut:
            cut = self._cut.get(id(variable._data))
            if cut is not None and cut[0]() is variable._data:
                rec.source = cut[1]

    def on_module_call(self, module, phase, inputs=None, output=None):
        calls = self._calls
        if phase == "enter":
            path = self._module_path(module)
            frame = None
            cls = type(module)
            own = _own_modules.get(cls)
            if own is None:
                own = _own_modules[cls] = cls.__module__.startswith("gradviz.")
            if own and not module._forward_hooks and not module._forward_pre_hooks and \
                    "forward" not in module.__dict__:
                if not calls:
                    frame = user_frame(2)
                else:
                    frame = calls[-1][2]
            calls.append((module, self._stack, frame, get_ident()))
            self._stack = self._stack + (path,)
            self.modules[path] = type(module).__name__
            return
        if calls and calls[-1][0] is module:
            self._stack = calls.pop()[1]
        else:  # an exit we did not see enter (the trace started inside the call): unwind to it if it is there
            for i in range(len(calls) - 1, -1, -1):
                if calls[i][0] is module:
                    self._stack = calls[i][1]
                    del calls[i:]
                    break
        if not calls:
            self._tree = None

    def _module_path(self, module):
        """The module's dotted path from the root module the user's code called (``model1.layer2``).

        Paths come from the root's ``named_modules()``, walked once and cached per root. A cached path is checked
        on each call (is the module still its parent's child of that name?), so replacing a submodule
        (``model.fc = nn.Linear(...)``) re-walks the tree once and the new module is named ``model.fc``."""
        tree = self._tree
        if tree is None:
            return self._root_path(module)
        entry = tree.paths.get(id(module))
        if entry is not None:
            parent, parent_path = self._calls[-1][0], self._stack[-1]
            if entry.parent_path == parent_path and entry() is module:
                children = getattr(parent, "_modules", None)
                if children is None or children.get(entry.parts[-1]) is module:
                    return entry.path
            elif entry.valid(module):
                return entry.path
        if id(module) not in tree.outside:
            root = tree.ref()
            if root is not None:
                self._name_module_tree(root, tree.name, tree)
            path = tree.path_of(module)
            if path is not None:
                return path
            tree.outside.add(id(module))  # not in the tree (a module passed in as an argument): no re-walk next time
        return self._stack[-1] + "." + type(module).__name__

    def _root_path(self, module):
        """A call from user code: a root we know, a submodule of one called directly (``model.features(x)``),
        or a new root, named as the calling code names it."""
        tree = self._trees.get(id(module))
        if tree is not None and tree.ref() is module:
            self._tree = tree
            return tree.name
        entry = self._module_names.get(id(module))
        if entry is not None and entry.valid(module):
            self._tree = entry.tree
            return entry.path
        name = name_in_frames(user_frame(3), module) or type(module).__name__
        self._tree = tree = _ModuleTree(module, name)
        self._name_module_tree(module, name, tree)
        return name

    def _name_module_tree(self, module, name, tree=None):
        """Dotted paths for a root module's submodules and parameters (``model1.conv.weight``). A module or a
        parameter keeps the first path it was given outside this tree; inside the tree its path is the tree's."""
        if tree is None:
            tree = _ModuleTree(module, name)
        try:
            self._trees[id(module)] = tree
        except TypeError:
            pass
        tree.outside = set()
        tree.paths = {}
        try:
            pairs = list(module.named_modules())
        except Exception:  # not an nn.Module after all: name the object alone
            pairs = [("", module)]
        for sub, m in pairs:
            try:
                entry = _ModuleName(m, f"{name}.{sub}" if sub else name, tree, tuple(sub.split(".")) if sub else ())
            except TypeError:
                continue
            tree.paths[id(m)] = entry
            known = self._module_names.get(id(m))
            if known is None or known() is not m:
                self._module_names[id(m)] = entry
        named = getattr(module, "named_parameters", None)
        for pname, p in (named() if named is not None else ()):
            path = f"{name}.{pname}"
            if id(p) in self._param_names and self._param_names[id(p)][0]() is p:
                continue
            self._param_names[id(p)] = (weakref.ref(p), path)
            rec = self._live_vars.get(id(p))
            if rec is not None and rec() is p:
                if p._name is None:
                    rec.name = path
                rec.is_parameter = True

    # ----- in-place, detach, hooks, .grad ------------------------------------------------------------------
    def on_inplace(self, variable, node, old_version, new_version):
        if node is None and sys._getframe(1).f_code is _BUMP_CODE:
            self._optimizer_update(variable, old_version, new_version)
            return
        location = location_of(user_frame(2))
        vrec = self._var_record(variable)
        last = self._last_fn
        op = node.name() if node is not None else (last.name() if last is not None else None)
        saved_by = self._stale_savers(variable, new_version)
        nid = None
        if node is not None:
            rec = self._node_record(node)
            nid = rec.id
            self._record_saved(rec, node)  # the in-place path re-points the node's saved tensors
            vrec.node = nid
            vrec.is_leaf = False
            vrec.requires_grad = True
            base = variable._base
            if base is not None and base._grad_fn is not None and base._grad_fn.name() == "CopySlices":
                crec = self._node_record(base._grad_fn)
                if crec.graph is None:
                    self.groups.place(crec, [rec])
                brec = self._var_record(base)
                brec.node = crec.id
                brec.is_leaf = False
        event = self._event("inplace", location, variable=vrec.id, op=op, old_version=old_version,
                            new_version=new_version, node=nid, saved_by=saved_by)
        if saved_by:
            self.groups.pin_event(event)
            for n in saved_by:
                self.groups.pin_node(self._nodes.get(n))

    def _optimizer_update(self, param, old_version, new_version):
        """An optimizer's ``step()`` wrote into ``param``. Recorded as an in-place event only when a live graph
        saved the old value (the ``optimizer`` event already says which parameters a step updates): then a
        backward through that graph will fail, and the step's line is where it went wrong."""
        saved_by = self._stale_savers(param, new_version)
        if not saved_by:
            return
        code = sys._getframe(3).f_code  # the optimizer's update loop (SGD._update_group…), which called bump_version
        owner = getattr(code, "co_qualname", "").partition(".")[0] or "optimizer"
        event = self._event("inplace", location_of(user_frame(3)), variable=self._var_record(param).id,
                            op=f"{owner}.step", old_version=old_version, new_version=new_version, node=None,
                            saved_by=saved_by)
        self.groups.pin_event(event)
        for n in saved_by:
            self.groups.pin_node(self._nodes.get(n))

    def _stale_savers(self, variable, new_version):
        """Live, unfreed nodes that saved this storage at an older version: backward through them will fail."""
        savers = self._savers.get(id(variable._vc))
        if not savers:
            return []
        found = []
        vc = variable._vc
        for rec in list(savers.values()):
            node = rec()
            if node is None or node._freed:
                continue
            if any(s.counter is vc and s.version < new_version for s in node.saved):
                found.append(rec.id)
        return found

    def on_detach(self, source, result, how):
        if _caller_is_internal(2):
            return
        location = location_of(user_frame(2))
        srec = self._var_record(source)
        rid = None
        if isinstance(result, Variable):
            if result is source:  # detach_(): the Variable itself left the graph
                rid = srec.id
                srec.node = None
                srec.is_leaf = True
            else:
                rrec = self._live_vars.get(id(result)) or self._new_var(result, how, location)
                rrec.source = srec.id
                rid = rrec.id
            array = result._data
        else:
            array = result
        if hasattr(array, "__array_interface__"):
            self._remember_cut(array, rid if rid is not None else srec.id)
        self._event("detach", location, source=srec.id, result=rid, how=how)

    def _remember_cut(self, array, vid):
        try:
            ref = weakref.ref(array)
        except TypeError:
            return
        self._cut[id(array)] = (ref, vid)
        if len(self._cut) > _CUT_MEMORY:
            self._cut.popitem(last=False)

    def on_hook(self, variable, hook, event, grad=None, result=None):
        if event != "call" and _caller_is_internal(2):
            return
        location = location_of(user_frame(2))
        vid = self._var_record(variable).id if variable is not None else None
        fields = {"variable": vid, "event": event, "retain_grad": hook is None,
                  "hook_name": None if hook is None else getattr(hook, "__qualname__", type(hook).__name__)}
        code = getattr(hook, "__code__", None)
        fields["hook_location"] = None if code is None else {"file": code.co_filename, "line": code.co_firstlineno}
        if event == "call" and self._backward is not None:
            fields["backward"] = self._backward["id"]
        self._event("hook", location, **fields)

    def on_grad_read(self, variable, grad):
        if _caller_is_internal(2):
            return
        frame = user_frame(2)
        location = location_of(frame)
        rec = self._var_record(variable)
        if rec.name is None:
            rec.name = name_in_frame(frame, variable)
        is_leaf = variable._grad_fn is None
        event = self._event("grad_read", location, variable=rec.id, was_none=grad is None, is_leaf=is_leaf,
                            retains_grad=variable.retains_grad, requires_grad=variable._requires_grad)
        self._last_grad_read = event
        if grad is None and not is_leaf:
            self.groups.pin_event(event)

    def on_grad_write(self, variable, grad):
        if _caller_is_internal(2):
            return
        location = location_of(user_frame(2))
        self._event("grad_write", location, variable=self._var_record(variable).id, is_none=grad is None)

    def on_optimizer(self, optimizer, event):
        location = location_of(user_frame(2))
        if event == "zero_grad":
            self.groups.zero_grad()
        groups = getattr(optimizer, "param_groups", None)
        if groups is None:  # a module's zero_grad()
            found = getattr(optimizer, "parameters", None)
            groups = [{"params": found() if found is not None else ()}]
        params = []
        live = self._live_vars
        for group in groups:
            for p in group.get("params", ()):
                if isinstance(p, Variable):
                    rec = live.get(id(p))
                    params.append((rec if rec is not None else self._var_record(p)).id)
        eid = next(self._event_ids)  # _event, inline: twice per training step
        record = {"id": eid, "seq": next(self._seq), "kind": "optimizer", "location": location,
                  "iteration": self.groups.iteration, "event": event, "optimizer": type(optimizer).__name__,
                  "parameters": params}
        self.events[eid] = record
        self.groups.note_event(record)
        if event == "step":
            self.groups.boundary()

    def _event(self, kind, location, **fields):
        eid = next(self._event_ids)
        event = {"id": eid, "seq": next(self._seq), "kind": kind, "location": location,
                 "iteration": self.groups.iteration}
        event.update(fields)
        self.events[eid] = event
        self.groups.note_event(event)
        return event

    # ----- backward -------------------------------------------------------------------------------------------
    def on_backward_begin(self, roots, grad_roots, retain_graph, inputs):
        frame = user_frame(2)
        location = location_of(frame)
        self._name_from_frame(frame, quick=True)
        root_ids = [self._var_record(r).id for r in roots]
        root_nodes = []
        for r in roots:
            fn = r._grad_fn
            root_nodes.append(None if fn is None else self._node_record(fn).id)
        bid = len(self.backwards) + self.groups.dropped["backwards"]
        gradient_from = None
        read = self._last_grad_read
        if read is not None and read["location"] == location and read["was_none"]:
            if any(g is None for g in grad_roots):
                gradient_from = read["id"]
        self._backward = {"id": bid, "seq": next(self._seq), "iteration": self.groups.iteration, "roots": root_ids,
                          "root_nodes": root_nodes, "retain_graph": bool(retain_graph),
                          "started": retain_graph is not None, "kind": "backward" if inputs is None else "grad",
                          "location": location, "visited": [], "grad_norms": {}, "leaf_grad_norms": {},
                          "gradient_from": gradient_from, "error": None, "freed_nodes": 0}
        self._visited = self._backward["visited"]  # appended to by every backward step
        self._grad_norms = self._backward["grad_norms"]
        self.backwards[bid] = self._backward
        self.groups.note_backward(self._backward)

    def on_backward_step(self, node, grad_outputs, grad_inputs):
        rec = self._live_nodes.get(id(node))
        if rec is None:
            rec = self._adopt(node)
        nid = rec.id
        self._visited.append(nid)
        if len(grad_outputs) == 1:
            g = grad_outputs[0]
            norm = 0.0 if g is None else norm_one(g)
        else:
            norm = norm_of(grad_outputs)
        self._grad_norms[nid] = norm
        if norm != norm or norm == _INF and nonfinite_norm(norm, grad_outputs):
            self._nonfinite(rec, "backward")

    def on_accumulate(self, variable, grad):
        b = self._backward
        rec = self._live_vars.get(id(variable))
        if rec is None:
            rec = self._var_record(variable)
        made = self._new_grad
        if made is not None:  # backward just made this leaf's .grad
            self._new_grad = None
            if made() is variable._grad:
                made.source = rec.id
        norm = norm_one(grad)
        b["leaf_grad_norms"][rec.id] = norm
        acc = rec.accumulator
        if norm != norm or norm == _INF and nonfinite_norm(norm, (grad,)):
            acc_rec = self._nodes.get(acc) if acc is not None else None
            if acc_rec is not None:
                self._nonfinite(acc_rec, "backward")
        if acc is not None:
            self._visited.append(acc)
            self._grad_norms[acc] = norm

    def on_buffers_freed(self, node):
        rec = self._live_nodes.get(id(node))
        if rec is None:
            return
        owners = rec.owners
        if owners:  # _release and MemoryBook.release, inline: once per node per backward
            rec.owners = None
            book = self.groups.memory
            counts = book.counts
            for key, _ in owners:
                entry = counts.get(key)
                if entry is not None:
                    entry[0] -= 1
                    if entry[0] == 0:
                        del counts[key]
                        book.now -= entry[1]
        counters = rec.counters
        if counters:  # _forget_savers, inline
            rec.counters = None
            savers = self._savers
            rid = rec.id
            for c in counters:
                entry = savers.get(c)
                if entry is not None:
                    entry.pop(rid, None)
                    if not entry:
                        del savers[c]
        b = self._backward
        if b is not None and rec.freed_by is None:
            rec.freed_by = bid = b["id"]
            b["freed_nodes"] += 1
            graph = rec.graph
            if graph is not None and graph.freed_by is None:
                graph.freed_by = bid
                graph.freed_at_iteration = self.groups.iteration

    def on_backward_end(self, roots, error):
        b = self._backward
        if b is None:
            return
        if error is not None:
            kind = type(error).__name__
            info = {"type": kind, "message": str(error).split("\n")[0], "code": error_code(error)}
            node = getattr(error, "node", None)
            if node is not None:
                info["node"] = self._node_record(node).id
            for attr in ("index", "expected", "current"):
                if hasattr(error, attr):
                    info[attr] = getattr(error, attr)
            variable = getattr(error, "variable", None)
            if isinstance(variable, Variable):
                info["variable"] = self._var_record(variable).id
            b["error"] = info
            self.groups.pin_backward(b)
        self.groups.backward_done(b)
        self._backward = None

    # ----- names ------------------------------------------------------------------------------------------------
    def _name_from_frame(self, frame, quick=False):
        """Give unnamed live Variables the name the user's frame binds them to (cheap: one pass over a dict).

        ``quick`` (at every backward call): when the frame's globals have as many entries as at the last full
        pass, only the names that held Variables then are looked at again — a loop rebinding ``loss`` is still
        seen, without scanning the whole module every iteration; stopping the trace does a full pass."""
        if frame is None:
            return
        live = self._live_vars
        if quick:
            scope = frame.f_globals
            known = self._global_names.get(id(scope))
            if known is not None and known[0] == len(scope):
                for key in known[1]:
                    value = scope.get(key)
                    if isinstance(value, Variable):
                        rec = live.get(id(value))
                        if rec is not None and rec.name is None:
                            rec.name = key
                if frame.f_code.co_flags & _CO_OPTIMIZED:  # a function: its locals too
                    for key, value in _locals(frame):
                        if isinstance(value, Variable) and not key.startswith("__"):
                            rec = live.get(id(value))
                            if rec is not None and rec.name is None:
                                rec.name = key
                return
        found = names_in_frame(frame, Variable)
        scope = frame.f_globals
        self._global_names[id(scope)] = (len(scope), tuple(
            key for key, value in scope.items() if isinstance(value, Variable) and not key.startswith("__")))
        for key, name in found.items():
            rec = live.get(key)
            if rec is not None and rec.name is None:
                rec.name = name

    # ----- results ------------------------------------------------------------------------------------------------
    @property
    def stats(self):
        """Cheap live counters for a progress line (safe to poll from another thread)."""
        g = self.groups
        return {"backward_calls": len(self.backwards) + g.dropped["backwards"], "iterations": g.iteration + 1,
                "retained_bytes": g.memory.now, "peak_retained_bytes": g.memory.peak, "graphs": g.graph_count,
                "nodes": len(self._nodes) + g.dropped["nodes"]}

    def to_dict(self):
        """The trace document (``gradviz-trace`` version 1, see docs/trace-format.md), with diagnostics."""
        from .document import build_document

        if self.active:
            self._name_from_frame(user_frame(2))
        return build_document(self, with_diagnostics=True)

    def to_json(self, path):
        from .document import write_json

        write_json(self.to_dict(), path)
        return path

    @property
    def memory(self):
        """``{"peak_retained_bytes", "final_retained_bytes", "series", "graphs"}`` (see docs/trace-format.md)."""
        from .document import memory_section

        return memory_section(self)

    @property
    def diagnostics(self):
        return self.to_dict()["diagnostics"]

    def why_none(self, variable):
        """Why ``variable.grad`` is None: the classified cause, with the edge or line where the path breaks."""
        from ..diagnose import why_none

        vid = self._var_record(variable).id if isinstance(variable, Variable) else int(variable)
        from .document import build_document

        if self.active:
            self._name_from_frame(user_frame(2))
        return why_none(build_document(self, with_diagnostics=False), vid)

    def variable_id(self, variable):
        """The id this trace gives ``variable`` (recording it now if it was never seen)."""
        return self._var_record(variable).id

    def node_id(self, node):
        return self._node_record(node).id

    def _repr_html_(self):
        """Jupyter shows a trace as its summary, graph and diagnostics."""
        from ..viz import notebook_html  # the facade, not rendering: tracing never imports rendering

        return notebook_html(self)

    def __repr__(self):
        s = self.stats
        state = "active" if self.active else ("stopped" if self.stopped else "not started")
        return (f"<gradviz.trace {state}: {s['nodes']} nodes, {s['graphs']} graphs, {s['backward_calls']} backward "
                f"calls, {s['iterations']} iterations>")
