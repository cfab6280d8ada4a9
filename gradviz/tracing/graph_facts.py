"""``GraphFacts``: the variables and nodes an adapter reports, their record ids, and where each node goes.

A ``TraceBuilder`` collaborator (builder.py), owner of the record ids and of the facts that make records: a
variable appears (``variable``) or dies, an op ran and built a node (``op``: the hottest fact, once per op), a node
seen only as someone's input (``external_node``), a node's edges and saved tensors, a leaf's gradient accumulator
(one record per leaf). Placing a node in a graph is ``Grouping``'s (grouping.py), except the commonest case (a
chain: one input node in an open graph), which ``op`` places itself; the memory a node's saved tensors hold is
``SavedMemory``'s (saved_memory.py). The record tables themselves (``variables``, ``nodes``, ``live_variables``,
``live_nodes``) are the builder's, shared by reference.
"""

import itertools

from . import elide as _elide
from .facts import LEAF
from .records import NodeRecord, VarRecord

_NO_EDGE = (None, 0)
_ACCUMULATE_INFO = ("AccumulateGrad", "AccumulateGrad", False)

_new_var = VarRecord.__new__  # _new_var(VarRecord): a record with no Python __init__ frame
_new_node = NodeRecord.__new__


class GraphFacts:
    """Variables and nodes, from the adapters' facts (see builder.py's module docstring for their conventions)."""

    def __init__(self, trace):
        self.trace = trace
        self.variables = trace.variables
        self.nodes = trace.nodes
        self.live_variables = trace.live_variables
        self.live_nodes = trace.live_nodes
        self.groups = trace.groups
        self.saved_memory = trace.saved_memory
        self.hold = trace.saved_memory.hold  # bound once: ``op`` calls it for every op that saved something
        self._var_ids = itertools.count()
        self._node_ids = itertools.count()
        self.lasti = -1  # the instruction of the last op's call (tells two graphs started on one line apart)

    def variable(self, key, origin, shape, dtype, nbytes, requires_grad, location, node=None, name=None,
                 volatile=False, grad_mode=True, is_parameter=False, module=None, device=None, handle=None):
        """A variable not made by a recorded op, or seen for the first time: ``origin`` is ``"new"``,
        ``"factory"``, ``"data"``, ``"detach"``, ``"numpy"``, ``"parameter"``, ``"grad"`` (backward made a leaf's
        ``.grad``), ``"external"`` (made before the trace) or ``"op"`` (an op that built no node). ``node`` is
        the key of its ``grad_fn`` if it has one (reported first); ``module`` the module stack it was made
        under (None: the current one; ``()`` for variables made before the trace); ``name`` a name the user
        gave it or its parameter path (then pass ``is_parameter``); ``handle`` anything the adapter wants kept
        on the record (never looked at here). Returns the record."""
        rec = _new_var(VarRecord)
        rec.id = vid = next(self._var_ids)
        rec.key = key
        rec.shape = shape
        rec.dtype = dtype
        rec.nbytes = nbytes
        rec.requires_grad = requires_grad
        rec.is_leaf = node is None
        rec.node = None if node is None else self.live_nodes[node].id
        rec.is_parameter = is_parameter or origin == "parameter"
        rec.origin = origin
        rec.accumulator = rec.source = rec.graph = rec.op = rec.inputs = rec.requires_grad_final = None
        rec.volatile = volatile
        rec.grad_mode = grad_mode
        rec.module = self.trace.module_stack if module is None else module
        rec.location = location
        groups = self.groups
        rec.iteration = groups.iteration
        rec.pinned = False
        rec.alive = True
        rec.device = device
        rec.handle = handle
        rec.name = name
        rec.named_by_user = name is not None and not is_parameter
        self.live_variables[key] = rec
        self.variables[vid] = rec
        groups.iter_vars.append(rec)
        return rec

    def variable_died(self, key, handle=None):
        """The variable behind ``key`` was freed (the key may be reused from now on). With ``handle``: only if
        that is still the live record's handle (a late notice about an older object with the same key)."""
        live = self.live_variables
        rec = live.get(key)
        if rec is not None and (handle is None or rec.handle is handle):
            del live[key]
            rec.alive = False
            acc = rec.accumulator
            if acc is not None:  # a leaf's accumulator lives as long as its leaf
                acc_rec = self.nodes.get(acc)
                if acc_rec is not None:
                    acc_rec.alive = False

    def variable_handle_died(self, handle):
        """``variable_died(handle.key, handle)``: for adapters whose handles know their key (a weak reference's
        callback can then be this method itself). Takes the lock: the object may die on any thread."""
        lock = self.trace.lock
        lock.acquire()
        try:
            self.variable_died(handle.key, handle)
        except Exception as exc:  # a weak reference callback: nobody to raise to
            self.trace.internal_error("variable_died", exc)
        finally:
            lock.release()

    def variable_state(self, key, name=None, requires_grad=None, is_parameter=None):
        """What the engine says now about a live variable: the name the user gave it (``x.name = ...``),
        whether it requires grad (the document's ``requires_grad_final`` for variables alive at the end), and
        whether it turned out to be a parameter."""
        rec = self.live_variables.get(key)
        if rec is None:
            return
        if is_parameter is not None:
            rec.is_parameter = is_parameter
        if name is not None:
            rec.name = name
            rec.named_by_user = True
        if requires_grad is not None:
            rec.requires_grad_final = requires_grad

    def name_variables(self, names):
        """``{key: name}``: names the user's code binds live variables to; only unnamed records take them."""
        live = self.live_variables
        for key, name in names.items():
            rec = live.get(key)
            if rec is not None and rec.name is None:
                rec.name = name

    def parameter_names(self, names):
        """``{variable key: dotted path}`` (``model1.0.weight``) for parameters found in a module tree: live
        records become parameters, named by their path unless the user named them. (Parameters not reported
        yet are named by the adapter when it reports them: ``variable(..., name=path, is_parameter=True)``.)"""
        live = self.live_variables
        for key, path in names.items():
            rec = live.get(key)
            if rec is not None:
                if not rec.named_by_user:
                    rec.name = path
                rec.is_parameter = True

    def op(self, key, op, class_name, custom, edges, input_variables, outputs, saved, location, meta=None,
           nonfinite=False, lasti=-1, handle=None):
        """An op ran forward and built graph node ``key``: ``op`` is the engine's name for the node
        (``MulBackward0``), ``class_name`` the op's class, ``custom`` whether user code defined it; ``edges`` its
        inputs (see the module docstring), ``input_variables`` the keys of its tensor arguments (a list or tuple,
        reported first), ``outputs`` ``OutputFact``s, ``saved`` ``SavedFact``s; ``nonfinite`` whether an output
        holds NaN/Inf (the adapter's cheap check; False when it cannot tell without a host sync); ``lasti`` the
        calling instruction (two calls on one line); ``handle`` is kept on the record for the adapter. Returns
        the node's record."""
        self.lasti = lasti
        live = self.live_variables
        n = len(input_variables)
        var_ids = None  # the outputs' ``inputs`` when ``in_ids`` has gaps
        if n == 1 and input_variables[0] is not None:  # one or two tensor arguments, as most ops have: no list
            in_ids = (live[input_variables[0]].id,)
        elif n == 2 and input_variables[0] is not None and input_variables[1] is not None:
            in_ids = (live[input_variables[0]].id, live[input_variables[1]].id)
        else:
            in_ids = []
            for k in input_variables:  # a loop, not a comprehension: no extra frame per op
                # None: an input no argument gave (a torch node's ``bias=None`` slot), kept to line up with edges
                in_ids.append(None if k is None else live[k].id)
            in_ids = tuple(in_ids)
            if None in in_ids:
                var_ids = tuple([i for i in in_ids if i is not None])
        rec = _new_node(NodeRecord)
        rec.id = nid = next(self._node_ids)
        rec.key = key
        rec.op = op
        rec.class_name = class_name
        rec.custom = custom
        rec.location = location
        rec.module = stack = self.trace.module_stack
        rec.variable = rec.freed_by = rec.nonfinite = rec.owners = rec.counters = rec.storages = rec.graph = None
        rec.meta = meta
        rec.external = rec.freed = False
        rec.alive = True
        rec.handle = handle
        rec.input_variables = in_ids
        live_nodes = self.live_nodes
        nodes = self.nodes
        live_nodes[key] = rec
        nodes[nid] = rec
        children = []  # _link, inline
        links = []
        for edge in edges:
            if edge is None:
                links.append(_NO_EDGE)
                continue
            ckey, nr = edge
            if nr is LEAF:
                acc = live[ckey].accumulator  # ``_accumulator``'s fast path: the leaf's live accumulator
                crec = nodes.get(acc) if acc is not None else None
                if crec is None or not crec.alive:
                    crec = self._accumulator(ckey)
                links.append((crec.id, 0))
            else:
                crec = live_nodes[ckey]
                links.append((crec.id, nr))
            children.append(crec)
        rec.inputs = tuple(links)
        groups = self.groups
        it = groups.iteration
        graph = None
        if len(children) == 1:  # the commonest placing (a chain: one input node in an open graph), here
            # rather than in Grouping.place: one call less per op; place takes every other case
            c = children[0]
            g = c.graph
            if g is not None and c.variable is None:
                while g.parent is not None:
                    g = g.parent
                if not g.backwarded and g.iteration == it:
                    rec.iteration = it
                    rec.graph = graph = g
                    g.nodes.append(nid)
                    g.alive += 1  # alive already, as its input node is (unless that one just died)
                    if g.alive == 1:
                        groups.graphs_alive += 1
        if graph is None:
            graph = groups.place(rec, children)
            it = groups.iteration  # placing may have begun (or folded back into) an iteration
        out_ids = ()
        output_bytes = 0
        new_id = self._var_ids
        all_vars = self.variables
        for okey, shape, dtype, nbytes, requires_grad, is_leaf, name, device, ohandle in outputs:
            orec = _new_var(VarRecord)  # variable(), unrolled: an op's outputs are the most common records by far
            orec.id = vid = next(new_id)
            orec.key = okey
            orec.shape = shape
            orec.dtype = dtype
            orec.nbytes = nbytes
            orec.requires_grad = requires_grad
            orec.is_leaf = is_leaf
            orec.node = None if is_leaf else nid
            orec.is_parameter = orec.pinned = orec.volatile = orec.named_by_user = False
            orec.grad_mode = orec.alive = True  # a recorded op ran with grad mode on
            orec.origin = "op"
            orec.accumulator = orec.source = orec.requires_grad_final = None
            orec.name = name
            orec.op = op
            orec.inputs = in_ids if var_ids is None else var_ids
            orec.graph = graph
            orec.module = stack
            orec.location = location
            orec.iteration = it
            orec.device = device
            orec.handle = ohandle
            live[okey] = orec
            all_vars[vid] = orec
            out_ids += (vid,)  # one output (the usual case): the tuple itself, no list to convert
            output_bytes += nbytes
        rec.outputs = out_ids
        if len(out_ids) == 1:
            rec.shape = shape
            rec.dtype = dtype
        else:
            first = outputs[0]
            rec.shape = first[1]
            rec.dtype = first[2]
        graph.output_bytes += output_bytes
        if saved:
            self.hold(rec, saved)
        else:
            rec.saved = ()
        if nonfinite:
            self.trace.grads.nonfinite(rec, "forward")
        return rec

    def unrecorded_op(self, op, input_variables, outputs, location, *, grad_mode=True, volatile=False):
        """An op that built no graph node although some input required grad (``no_grad``, volatile inputs, a
        non-differentiable op): its outputs (``OutputFact``s) are what 'why is there no gradient' explains.
        Ops on plain data need not be reported at all."""
        live = self.live_variables
        in_ids = tuple([live[k].id for k in input_variables])
        for okey, shape, dtype, nbytes, requires_grad, _, name, device, handle in outputs:
            orec = self.variable(okey, "op", shape, dtype, nbytes, requires_grad, location, name=name,
                                 grad_mode=grad_mode, volatile=volatile, device=device, handle=handle)
            orec.op = op
            orec.inputs = in_ids

    def external_node(self, key, op, class_name, custom, *, shape=(), dtype=None, meta=None, external=True,
                      handle=None, module=()):
        """A node first seen as someone's input: built before the trace started (``external``, no location) or
        an engine-made node no op reported (gradviz's ``CopySlices``, ``external=False``, with the shape and
        dtype it produces). Report its inputs with ``node_inputs`` and its saved tensors with ``node_saved``
        after every node it points at is known; ``module`` is its module stack when the adapter can tell (a
        snapshot given the model: the module owning a parameter the node uses). Returns the record."""
        rec = _new_node(NodeRecord)
        rec.id = nid = next(self._node_ids)
        rec.key = key
        rec.op, rec.class_name, rec.custom = op, class_name, custom
        rec.location = None
        rec.module = tuple(module)
        rec.iteration = self.groups.iteration
        rec.inputs = rec.input_variables = rec.outputs = rec.saved = ()
        rec.shape = shape
        rec.dtype = dtype
        rec.variable = rec.graph = rec.freed_by = rec.nonfinite = rec.owners = rec.counters = rec.storages = None
        rec.meta = meta
        rec.external = external
        rec.freed = False
        rec.alive = True
        rec.handle = handle
        self.live_nodes[key] = rec
        self.nodes[nid] = rec
        return rec

    def node_inputs(self, key, edges, input_shapes=()):
        """The edges of a node reported by ``external_node``; ``input_shapes`` ((shape, dtype name) per edge, in
        edge order) fill in the shapes of input nodes that do not know their own."""
        rec = self.live_nodes[key]
        self._link(rec, edges)
        nodes = self.nodes
        for (child_id, _), meta in zip(rec.inputs, input_shapes):
            child = nodes.get(child_id) if child_id is not None else None
            if child is not None and child.dtype is None:
                child.shape, child.dtype = meta

    def node_saved(self, key, saved, freed=False):
        """What node ``key`` saved for backward (``SavedFact``s), replacing what was reported before (an
        in-place op re-points a node's saved tensors); ``freed`` when backward already released them."""
        rec = self.live_nodes[key]
        self.saved_memory.describe(rec, saved, freed)

    def node_died(self, key, handle=None):
        """The node behind ``key`` was freed: its saved memory is released, its graph may be gone. ``handle``
        as for ``variable_died``."""
        live = self.live_nodes
        rec = live.get(key)
        if rec is None or (handle is not None and rec.handle is not handle):
            return
        del live[key]
        rec.alive = False
        if rec.owners:
            self.saved_memory.release(rec)
        if rec.counters or rec.storages:
            self.saved_memory.forget(rec)
        pending = self.trace.versions.silent_pending
        if pending:
            pending.pop(rec.id, None)
        graph = rec.graph
        if graph is not None:
            while graph.parent is not None:
                graph = graph.parent
            graph.alive -= 1
            if graph.alive == 0:
                self.groups.graphs_alive -= 1
                if graph.structure is not None and len(graph.nodes) > _elide.GRAPH_NODE_LIMIT:
                    _elide.prune(self.trace, graph)  # a dead giant graph: let go of the records its document elides

    def node_handle_died(self, handle):
        """``node_died(handle.key, handle)`` (see ``variable_handle_died``)."""
        lock = self.trace.lock
        lock.acquire()
        try:
            self.node_died(handle.key, handle)
        except Exception as exc:
            self.trace.internal_error("node_died", exc)
        finally:
            lock.release()

    def _link(self, rec, edges):
        """Fill ``inputs`` from the edges; returns the input node records (to place the graph)."""
        children = []
        inputs = []
        live = self.live_nodes
        for edge in edges:
            if edge is None:
                inputs.append(_NO_EDGE)
                continue
            ckey, nr = edge
            if nr is LEAF:
                crec = self._accumulator(ckey)
                nr = 0
            else:
                crec = live[ckey]
            inputs.append((crec.id, nr))
            children.append(crec)
        rec.inputs = tuple(inputs)
        return children

    def _accumulator(self, leaf_key):
        """A leaf's gradient accumulator: one record per leaf, shared by every graph that uses the leaf. Engines
        make a new accumulator node for a parameter each iteration (once the old graph is gone); they all stand
        for the same thing, so the record belongs to the leaf (it lives as long as the leaf) and is found through
        it: no record to make, and none to drop, per parameter per iteration."""
        lrec = self.live_variables[leaf_key]
        acc = lrec.accumulator
        if acc is not None:
            rec = self.nodes.get(acc)
            if rec is not None and rec.alive:
                return rec
        rec = _new_node(NodeRecord)
        rec.id = nid = next(self._node_ids)
        rec.key = None
        rec.op, rec.class_name, rec.custom = _ACCUMULATE_INFO
        rec.location = rec.graph = rec.freed_by = rec.nonfinite = rec.owners = rec.meta = None
        rec.counters = rec.storages = None
        rec.module = rec.inputs = rec.input_variables = rec.outputs = rec.saved = ()
        rec.iteration = self.groups.iteration
        rec.external = rec.freed = False
        rec.alive = True
        rec.handle = None
        rec.variable = lrec.id
        rec.shape = lrec.shape
        rec.dtype = lrec.dtype
        lrec.accumulator = nid
        self.nodes[nid] = rec
        return rec

    def existing_output(self, variable, node):
        """For a snapshot of a graph that already exists (no trace): ``variable`` (reported) is an output of
        ``node`` (reported, with its inputs); the graph holding it is made, merging what it reaches."""
        rec = self.live_variables[variable]
        nrec = self.live_nodes[node]
        if rec.id not in nrec.outputs:
            nrec.outputs = nrec.outputs + (rec.id,)
        if nrec.dtype is None:
            nrec.shape, nrec.dtype = rec.shape, rec.dtype
        groups = self.groups
        if nrec.graph is None:
            graph = groups.new_graph()
            groups.adopt_into(graph, nrec, merge=True)
        rec.graph = nrec.graph

