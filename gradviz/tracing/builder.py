"""``TraceBuilder``: the engine-neutral half of the tracer. It is told *facts* and owns the document.

An engine adapter (``tracing/adapters/``) watches one engine and reports what happened in plain terms — an op
ran, a value changed in place, backward visited a node, a ``.grad`` was read, a module was entered, a parameter
was updated, an object died — using keys *it* chooses for the engine's objects (any hashable: ``id(obj)`` for
gradviz's engine). The builder gives every variable and node a small id in creation order, groups nodes into
graphs, iterations and structures, keeps the bounded window of full records, books retained memory, predicts
stale versions and builds the ``gradviz-trace`` document. It imports no engine and holds no engine object:
everything it keeps is plain data (ints, strings, shapes, ``Location``s), and it learns that an object is gone
only from an explicit ``variable_died`` / ``node_died`` fact.

Conventions shared by the fact methods:

- ``location`` is a ``tracing.frames.Location`` (one shared instance per code object and line: compare by
  identity) or None; adapters find the user's frame with ``frames.user_frame`` and ``frames.location_at``.
- shapes are tuples of ints, dtypes names (``"float32"``), sizes in bytes, devices strings (``"cpu"``,
  ``"cuda:0"``) or None for the engine's only device.
- An edge (a node's input) is ``None`` (no edge), ``(node_key, output_nr)``, or ``(variable_key, LEAF)`` for a
  leaf's gradient accumulator (gradviz's and PyTorch's ``AccumulateGrad``): one accumulator record per leaf,
  shared by every graph that uses it. The node behind a ``node_key`` edge must have been reported first
  (``op`` or ``external_node``); a leaf's variable likewise (``variable``).
- Saved tensors are ``SavedFact`` tuples (plain tuples in that order are fine): which variable (key or None),
  ``kind``/``index`` (how the node refers to it), shape and bytes of the saved value, the version its storage
  had when saved and the key of that storage's version counter (what an in-place change reports), the memory
  block it occupies (a key; a view and its base share one) with that block's bytes — or block None when its
  memory is not charged to the graph (a parameter's storage belongs to the model) — and its device; last,
  optionally, ``storage``: the key of the memory it lives in whether charged or not (a base, its views, its
  ``.data``, its ``detach()`` and a numpy array on it share one) — with the version-counter key, what tells a
  tracked in-place change from a silent one (``.data`` has a counter of its own). A 10-tuple means no storage.
- Threads: facts may come from several threads. An adapter reports facts between ``builder.acquire()`` and
  ``builder.release()`` (or inside ``with builder:``): a re-entrant lock (a weak reference callback may report a
  death in the middle of a fact), and, when the thread holding it is not the one whose state is loaded, a switch
  of what is per thread by nature — the backward call in progress, the module call stack, the last ``.grad``
  read (``ThreadState``). The fact methods read those as plain attributes, so they cost nothing per fact; the
  facts of one backward call must come from the thread that began it. The death callbacks
  (``variable_handle_died``, ``node_handle_died``) take the lock themselves; ``document()`` builds its records
  under it (a consistent snapshot, whatever the other threads do).
"""

import itertools
import threading
import weakref
from collections import namedtuple
from threading import get_ident

from ..document.vocabulary import error_code, is_reset_op
from . import elide as _elide
from .checks import BackwardChecks
from .ddp_facts import DdpFacts
from .grad_ledger import GradLedger
from .grouping import HOLD_BACKWARDS, LIGHT_CHAIN_LIMIT, Grouping
from .records import NodeRecord, VarRecord, safe_message
from .schedule import LightWatch, Schedule
from .training_facts import TrainingFacts

LEAF = "leaf"  # the second half of an edge to a leaf's gradient accumulator: (variable_key, LEAF)
_NO_EDGE = (None, 0)
_ACCUMULATE_INFO = ("AccumulateGrad", "AccumulateGrad", False)
_INF = float("inf")


SavedFact = namedtuple("SavedFact", "variable kind index shape nbytes version counter block block_bytes device storage",
                       defaults=(None,))
SavedFact.__doc__ = "One tensor a node saved for backward (see the module docstring)."

OutputFact = namedtuple("OutputFact", "key shape dtype nbytes requires_grad is_leaf name device handle")
OutputFact.__doc__ = ("One output of an op: ``is_leaf`` is False when the op's node is its ``grad_fn`` (an output "
                      "that does not require grad, or an in-place op's, may not have it); ``handle`` is kept on "
                      "its record for the adapter.")


_new_var = VarRecord.__new__  # _new_var(VarRecord): a record with no Python __init__ frame
_new_node = NodeRecord.__new__


class ThreadState:
    """What the builder keeps for one thread while another thread's state is loaded (see ``switch_thread``)."""

    __slots__ = ("backward", "visited", "grad_norms", "module_stack", "module_keys", "last_grad_read", "info",
                 "thread", "listed")

    def __init__(self, thread):
        self.backward = self.visited = self.grad_norms = self.last_grad_read = None
        self.module_stack = ()
        self.module_keys = []
        self.info = {"name": thread.name, "ident": thread.ident}  # the document's name for the thread
        self.thread = weakref.ref(thread)
        self.listed = False  # whether ``builder.threads`` lists it yet


class TraceBuilder:
    """Everything the tracer knows, built from facts. See the module docstring for the conventions.

    Adapters may read (never write) ``live_variables`` and ``live_nodes`` (key -> record, while the object
    lives; a record's ``id`` is its document id), ``saved_counters`` and ``saved_storages`` (the version-counter
    and storage keys some live, unfreed node saved) to avoid a method call on their hot paths.

    Those two indexes are brought up to date when read (properties): a node's saved tensors wait in a queue and
    are indexed only if the node is still unfreed then. A training step's nodes are saved in forward and freed by
    backward before anything asks (an in-place change, an optimizer's update), so most never enter the indexes.
    """

    def __init__(self, window=3):
        self.window = window
        self.script = None
        self.exception = None  # what ended the traced block, if it raised
        self.holders = []  # the user's containers holding graph outputs when the trace stopped (holders.py)
        self.stopped = False
        self.engines = {}  # engine name -> {"name", "version", "devices"}
        self.variables = {}  # record id -> VarRecord (the document's; dropped records leave this table)
        self.nodes = {}  # record id -> NodeRecord
        self.live_variables = {}  # adapter key -> VarRecord, while the variable lives
        self.live_nodes = {}  # adapter key -> NodeRecord, while the node lives
        self._var_ids = itertools.count()
        self._node_ids = itertools.count()
        self._event_ids = itertools.count()
        self._seq = itertools.count()  # one order shared by events and backward calls
        self.events = {}  # event id -> dict
        self.backwards = {}  # backward id -> dict
        self.backward = None  # the backward call in progress (its dict)
        self._visited = self._grad_norms = None  # its "visited" list and "grad_norms" dict
        self.module_stack = ()  # module call stack: paths, outermost first
        self._module_keys = []  # (module key, the stack before it was entered), innermost last
        self.modules = {}  # path -> class name, for every module call seen
        # version-counter key -> {node id: NodeRecord} of the live, unfreed nodes that saved that storage
        self._saved_counters = {}
        # storage key -> {node id: NodeRecord} likewise, by the memory saved (SavedFact.storage)
        self._saved_storages = {}
        self._unindexed = {}  # node id -> NodeRecord whose counters and storages are not in those two yet
        self._handouts = {}  # numpy hand-out token -> [variable id, location, its last numpy_write event], watched
        self._handout_ids = itertools.count()
        self._silent_pending = {}  # node id -> inplace events that silently changed what it saved, not yet used
        self._last_grad_read = None
        self.lasti = -1  # the instruction of the last op's call (tells two graphs started on one line apart)
        self.first_nonfinite = None
        # beyond the first NaN/Inf (often a harmless -inf of an attention mask in iteration 0), the first
        # non-finite loss and the first non-finite backward gradient are pinned too: a real NaN in a middle
        # iteration keeps its records
        self._nonfinite_loss_pinned = self._nonfinite_grad_pinned = False
        self.grad_ledger = GradLedger()  # every .grad reset, accumulation and step, for summed_grads
        self._ledger_pending = self.grad_ledger.pending  # its list of this backward's accumulations
        self.internal_errors = []
        self._unseen = {}  # (kind, what, how, location) -> entry of the document's "unseen" list
        self.checks = BackwardChecks()  # custom Functions' backward checks (wrong-backward)
        self.schedule = Schedule()  # which iterations are full (every one, unless ``use_schedule`` says light)
        self.light = LightWatch()  # what light iterations found
        self.ddp_facts = DdpFacts()  # what DistributedDataParallel did on this rank (the "ddp" section)
        self.training = TrainingFacts()  # train/eval modes, calls and switches (the "training" section)
        self.groups = Grouping(self)
        # threads: the lock around facts, the state of each thread, the threads seen and not seen
        self.lock = threading.RLock()
        if type(self).release is TraceBuilder.release:  # the lock's own: no Python frame per fact
            self.release = self.lock.release
        self._thread = ThreadState(threading.current_thread())  # whose state the attributes above hold
        self.thread_ident = get_ident()
        self._thread_states = {self.thread_ident: self._thread}  # ident -> ThreadState
        self.threads = []  # {"name", "ident"} of every thread that started a graph or ran a backward
        self._observed = weakref.WeakSet()  # their Thread objects
        self._running_at_start = []  # (Thread, {"name", "ident", "daemon"}) of the other threads then

    @property
    def saved_counters(self):
        """Version-counter key -> ``{node id: NodeRecord}`` of the live, unfreed nodes that saved that storage."""
        if self._unindexed:
            self._index_queued()
        return self._saved_counters

    @property
    def saved_storages(self):
        """Storage key -> ``{node id: NodeRecord}`` of the live, unfreed nodes that saved that memory."""
        if self._unindexed:
            self._index_queued()
        return self._saved_storages

    def _index_queued(self):
        """Index the queued nodes' saved tensors, in the order they were saved (as if indexed then)."""
        queued, self._unindexed = self._unindexed, {}
        by_counter = self._saved_counters
        by_storage = self._saved_storages
        for rid, rec in queued.items():
            for counter, _ in rec.counters or ():
                entry = by_counter.get(counter)
                if entry is None:
                    by_counter[counter] = {rid: rec}
                else:
                    entry[rid] = rec
            for storage, _ in rec.storages or ():
                entry = by_storage.get(storage)
                if entry is None:
                    by_storage[storage] = {rid: rec}
                else:
                    entry[rid] = rec

    # ----- threads ------------------------------------------------------------------------------------------
    def acquire(self):
        """Take the lock for facts from the calling thread (re-entrant), loading that thread's state."""
        self.lock.acquire()
        if self.thread_ident != get_ident():
            self.switch_thread()

    def release(self):
        """Let go of the lock ``acquire`` took (an instance's ``release`` is the lock's own method)."""
        self.lock.release()

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc):
        self.lock.release()
        return False

    def switch_thread(self):
        """Store the loaded thread's state and load the calling thread's (lock held; adapters that inline
        ``acquire`` call this when ``thread_ident`` is not ``threading.get_ident()``)."""
        old = self._thread
        old.backward, old.visited, old.grad_norms = self.backward, self._visited, self._grad_norms
        old.module_stack, old.module_keys, old.last_grad_read = self.module_stack, self._module_keys, \
            self._last_grad_read
        ident = get_ident()
        thread = threading.current_thread()
        new = self._thread_states.get(ident)
        if new is None or new.thread() is not thread:  # a new thread (perhaps with an ended one's ident)
            new = self._thread_states[ident] = ThreadState(thread)
        self.backward, self._visited, self._grad_norms = new.backward, new.visited, new.grad_norms
        self.module_stack, self._module_keys, self._last_grad_read = new.module_stack, new.module_keys, \
            new.last_grad_read
        self._thread = new
        self.thread_ident = ident

    def thread(self):
        """``{"name", "ident"}`` of the thread whose facts are being reported (graphs and backward calls say
        which thread built them)."""
        state = self._thread
        if not state.listed:
            state.listed = True
            self.threads.append(state.info)
            thread = state.thread()
            if thread is not None:
                self._observed.add(thread)
        return state.info

    def note_running_threads(self):
        """The trace starts: remember the other threads running now. Their context was made before the trace,
        so an adapter that attaches per context or per new thread cannot observe them (``unobserved_threads``)."""
        me = threading.current_thread()
        self._running_at_start = [(t, {"name": t.name, "ident": t.ident, "daemon": t.daemon})
                                  for t in threading.enumerate() if t is not me]

    def note_thread(self, thread):
        """A thread started while tracing by code the trace does not observe (it will not be observed either,
        unless it reports facts some other way): listed by ``unobserved_threads`` if it reports nothing."""
        self._running_at_start.append((thread, {"name": thread.name, "ident": None, "daemon": thread.daemon}))

    def unobserved_threads(self):
        """Threads running when the trace started, or started by code it does not observe, that reported
        nothing to it (their ops, if any, are not in the document)."""
        observed = self._observed
        found = []
        for thread, info in self._running_at_start:
            if thread not in observed:
                found.append(dict(info, ident=thread.ident))  # known once started
        return found

    def unseen(self, kind, what, *, how=None, location=None, advice=None, count=1):
        """Something ran that the trace could not observe (a child process, a compiled region, a fact this
        engine version cannot give): listed in the document's ``unseen`` section, so a report that saw less than
        the run did never reads as an all-clear. The same ``(kind, what, how, location)`` again adds to ``count``."""
        key = (kind, what, how, location)
        entry = self._unseen.get(key)
        if entry is None:
            self._unseen[key] = {"kind": kind, "what": what, "count": count, "how": how, "location": location,
                                 "advice": advice}
        else:
            entry["count"] += count
            if advice and not entry["advice"]:
                entry["advice"] = advice

    def unseen_entries(self):
        """The ``unseen`` entries so far, in the order first reported (locations still ``Location`` objects)."""
        return [dict(e) for e in self._unseen.values()]

    def internal_error(self, where, exc):
        """The tracer failed at ``where`` (an adapter callback): recorded, never raised into the user's code."""
        errors = self.internal_errors
        if len(errors) < 100:  # a bug that fires on every op must not grow without bound
            errors.append({"where": where, "type": type(exc).__name__, "message": safe_message(exc)})
        elif len(errors) == 100:
            errors.append({"where": "tracer", "type": "TooManyErrors",
                           "message": "more internal errors happened and were not recorded"})

    # ----- the engine -------------------------------------------------------------------------------------
    def engine(self, name, version=None, devices=(), memory=None, accelerator=None):
        """The engine an adapter watches (``"gradviz"``, ``"torch"``), its version and the devices seen so far;
        the document's ``engine`` section. Call again (or ``device``) as more devices show up. ``memory`` names
        how the adapter measures saved memory when it has more than one way (the torch adapter's);
        ``accelerator`` what the engine's build supports and this machine offers (``{"built", "available",
        "devices"}``)."""
        entry = self.engines.get(name)
        if entry is None:
            entry = self.engines[name] = {"name": name, "version": version, "devices": []}
        if version is not None:
            entry["version"] = version
        if memory is not None:
            entry["memory"] = memory
        if accelerator is not None:
            entry["accelerator"] = dict(accelerator)
        for d in devices:
            if d not in entry["devices"]:
                entry["devices"].append(d)

    def device(self, name, device):
        """Engine ``name`` put a tensor on ``device`` (adapters call this once per new device)."""
        self.engine(name, devices=(device,))

    # ----- variables -------------------------------------------------------------------------------------------
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
        rec.module = self.module_stack if module is None else module
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
        lock = self.lock
        lock.acquire()
        try:
            self.variable_died(handle.key, handle)
        except Exception as exc:  # a weak reference callback: nobody to raise to
            self.internal_error("variable_died", exc)
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

    # ----- nodes --------------------------------------------------------------------------------------------
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
        rec.module = stack = self.module_stack
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
                acc = live[ckey].accumulator  # _accumulator's fast path: the leaf's live accumulator
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
            self._hold(rec, saved)
        else:
            rec.saved = ()
        if nonfinite:
            self._nonfinite(rec, "forward")
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
        self._saved(rec, saved, freed)

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
            self._release(rec)
        if rec.counters or rec.storages:
            self._forget_index(rec)
        if self._silent_pending:
            self._silent_pending.pop(rec.id, None)
        graph = rec.graph
        if graph is not None:
            while graph.parent is not None:
                graph = graph.parent
            graph.alive -= 1
            if graph.alive == 0:
                self.groups.graphs_alive -= 1
                if graph.structure is not None and len(graph.nodes) > _elide.GRAPH_NODE_LIMIT:
                    _elide.prune(self, graph)  # a dead giant graph: let go of the records its document elides

    def node_handle_died(self, handle):
        """``node_died(handle.key, handle)`` (see ``variable_handle_died``)."""
        lock = self.lock
        lock.acquire()
        try:
            self.node_died(handle.key, handle)
        except Exception as exc:
            self.internal_error("node_died", exc)
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

    def _saved(self, rec, saved, freed):
        """Saved-tensor descriptions, and what they hold in memory (charged to the graph while alive): each
        distinct block once, parameters' storage not at all. Replaces what ``rec`` held before."""
        if rec.owners:
            self._release(rec)
        if rec.counters or rec.storages:
            self._forget_index(rec)
        rec.freed = freed
        if not saved:
            rec.saved = ()
        elif freed:  # released already: described, nothing held, only the version counters to predict with
            live = self.live_variables
            items = []
            counters = []
            for fact in saved:
                vkey, kind, index, shape, nbytes, version, counter = fact[:7]
                items.append((None if vkey is None else live[vkey].id, kind, index, shape, nbytes, version))
                if counter is not None:
                    counters.append((counter, version))
            rec.saved = tuple(items)
            if counters:
                rec.counters = tuple(counters)
                self._unindexed[rec.id] = rec
        else:
            self._hold(rec, saved)

    def _hold(self, rec, saved):
        """``_saved`` for a node holding nothing yet (``op``'s, once per op): describe ``saved`` and charge the
        memory it holds. ``rec.owners`` is ((block, bytes), ...) of each distinct block; ``rec.counters``
        ((version-counter key, version at save), ...) and ``rec.storages`` ((storage key, version-counter key),
        ...), None when empty, queued for the saver indexes."""
        live = self.live_variables
        if len(saved) == 1:  # the commonest case: one saved tensor, no distinct blocks to find
            fact = saved[0]
            if len(fact) > 10:
                vkey, kind, index, shape, nbytes, version, counter, block, block_bytes, _, storage = fact
            else:  # a 10-tuple: no storage
                vkey, kind, index, shape, nbytes, version, counter, block, block_bytes, _ = fact
                storage = None
            rec.saved = ((None if vkey is None else live[vkey].id, kind, index, shape, nbytes, version),)
            owners = None if block is None else ((block, block_bytes),)
            counters = None if counter is None else ((counter, version),)
            storages = None if storage is None else ((storage, counter),)
        else:
            items = []
            blocks = {}
            counters = []
            storages = []
            wide = len(saved[0]) > 10  # SavedFacts with a storage (plain 10-tuples have none)
            storage = None
            for fact in saved:
                if wide:
                    vkey, kind, index, shape, nbytes, version, counter, block, block_bytes, _, storage = fact
                    if storage is not None:
                        storages.append((storage, counter))
                else:
                    vkey, kind, index, shape, nbytes, version, counter, block, block_bytes, _ = fact
                items.append((None if vkey is None else live[vkey].id, kind, index, shape, nbytes, version))
                if block is not None:
                    blocks[block] = block_bytes
                if counter is not None:
                    counters.append((counter, version))
            rec.saved = tuple(items)
            owners = tuple(blocks.items()) if blocks else None
            counters = tuple(counters) if counters else None
            storages = tuple(storages) if storages else None
        if owners is not None:
            rec.owners = owners
            groups = self.groups
            book = groups.memory  # MemoryBook.hold and Grouping.charge, inline: once per op
            counts = book.counts
            graph = rec.graph
            if graph is not None:
                while graph.parent is not None:
                    graph = graph.parent
                keys = graph.owner_keys
                if keys is None:
                    keys = graph.owner_keys = {}
            for block, nbytes in owners:
                entry = counts.get(block)
                if entry is None:
                    counts[block] = [1, nbytes]
                    book.now += nbytes
                else:
                    entry[0] += 1
                if graph is not None and block not in keys:
                    keys[block] = nbytes
                    graph.saved_bytes += nbytes
            if book.now > book.top:  # MemoryBook.hold's bookkeeping, inline
                book.top = book.now
                if book.now > book.peak:
                    book.peak = book.now
        if counters is not None or storages is not None:  # indexed when someone reads the indexes
            rec.counters = counters
            rec.storages = storages
            self._unindexed[rec.id] = rec

    def _release(self, rec):
        owners = rec.owners
        if owners:
            rec.owners = None
            self.groups.memory.release(owners)

    def _forget_index(self, rec):
        """Take a node out of ``saved_counters`` and ``saved_storages``, or out of the queue for them."""
        counters, storages = rec.counters, rec.storages
        rec.counters = rec.storages = None
        if self._unindexed.pop(rec.id, None) is not None:
            return
        if counters:
            _unindex(self._saved_counters, counters, rec.id)
        if storages:
            _unindex(self._saved_storages, storages, rec.id)

    def _nonfinite(self, rec, phase):
        if rec.nonfinite is None:
            rec.nonfinite = phase
        if self.first_nonfinite is None:
            self.first_nonfinite = {"node": rec.id, "phase": phase, "iteration": self.groups.iteration,
                                    "backward": None if self.backward is None else self.backward["id"]}
            self.groups.pin_node(rec)
        if phase == "backward" and not self._nonfinite_grad_pinned:
            self._nonfinite_grad_pinned = True
            self.groups.pin_node(rec)
            if self.backward is not None:
                self.groups.pin_backward(self.backward)

    def nonfinite_data(self, name, location, op=None):
        """The first NaN/Inf forward value came in with the data: bound to ``name`` at ``location`` (the line that
        loaded or made it, ``data_origin``), not made by an op of the graph; ``op``: the node that received it."""
        first = self.first_nonfinite
        if first is not None and first["phase"] == "forward" and "data" not in first:
            first["data"], first["data_location"], first["data_op"] = name, location, op

    def nonfinite_output(self, node):
        """Node ``node``'s output holds NaN/Inf, found after the op (an adapter that checks outputs in batches,
        to avoid a host sync per op, reports it this way instead of through ``op(nonfinite=True)``)."""
        rec = self.live_nodes.get(node)
        if rec is not None:
            self._nonfinite(rec, "forward")

    # ----- modules ------------------------------------------------------------------------------------------
    def module_enter(self, key, path, class_name):
        """A module call began: ``key`` identifies the module object, ``path`` is its dotted path from the root
        module the user's code called (``model1.layer2``). Ops until the matching ``module_exit`` run under it."""
        self._module_keys.append((key, self.module_stack))
        self.module_stack = self.module_stack + (path,)
        self.modules[path] = class_name

    def module_exit(self, key):
        """A module call ended (normally or by an exception). An exit without its enter (the trace started
        inside the call) unwinds to that module if it is on the stack, and is ignored otherwise."""
        calls = self._module_keys
        if calls and calls[-1][0] == key:
            self.module_stack = calls.pop()[1]
            return
        for i in range(len(calls) - 1, -1, -1):
            if calls[i][0] == key:
                self.module_stack = calls[i][1]
                del calls[i:]
                return

    # ----- in-place changes, cuts, hooks, .grad -------------------------------------------------------------
    def inplace(self, variable, old_version, new_version, counter, location, *, node=None, op=None, base=None,
                base_node=None, storage=None):
        """An in-place op changed ``variable``'s storage (version counter ``counter`` moved from ``old_version``
        to ``new_version``); ``node`` is the key of the variable's new ``grad_fn`` when the op was recorded
        (report its saved tensors again with ``node_saved`` first), ``op`` the op's name. Writing through a view
        rewrote the base's history: ``base`` is the base variable's key and ``base_node`` the key of its new
        node (gradviz's ``CopySlices``). Live nodes that saved the storage at an older version are listed in
        the event's ``saved_by``: backward through them will fail, and this line is where it went wrong.
        ``storage`` is the key of the memory written (as in ``SavedFact``): live nodes that saved that memory
        under *another* version counter are listed in ``silent_saved_by`` — the write went through ``.data`` (or
        another tensor on the same memory) and no version check will see it."""
        vrec = self.live_variables[variable]
        saved_by = self._stale_savers(counter, new_version)
        silent = self._silent_savers(storage, counter, saved_by) if storage in self.saved_storages else None
        nid = None
        if node is not None:
            rec = self.live_nodes[node]
            nid = rec.id
            vrec.node = nid
            vrec.is_leaf = False
            vrec.requires_grad = True
            if base_node is not None:
                crec = self.live_nodes[base_node]
                if crec.graph is None:
                    self.groups.place(crec, [rec])
                brec = self.live_variables[base]
                brec.node = crec.id
                brec.is_leaf = False
        event = self._event("inplace", location, variable=vrec.id, op=op, old_version=old_version,
                            new_version=new_version, node=nid, saved_by=saved_by)
        if vrec.origin != "op" and is_reset_op(event):
            self._grad_reset_through(vrec)
            if self.groups.hold and self.groups.held:
                self._release_hold()
        if silent:
            event["silent_saved_by"] = silent
            event["silent_backward"] = None  # the backward that then used the changed values (backward_step)
            event["silent_backward_location"] = None
            pending = self._silent_pending
            for n in silent:
                pending.setdefault(n, []).append(event)
        if saved_by or silent:
            self.groups.pin_event(event)
            for n in saved_by + (silent or []):
                self.groups.pin_node(self.nodes.get(n))

    def _grad_reset_through(self, vrec):
        """An in-place reset (``p.grad.zero_()``, also through ``.data``/``detach()``) of a leaf's gradient."""
        for _ in range(4):
            if vrec is None:
                return
            if vrec.origin == "grad":
                if vrec.source is not None:
                    self.grad_ledger.reset(vrec.source)
                return
            if vrec.origin not in ("data", "detach"):
                return
            vrec = self.variables.get(vrec.source)

    def parameter_update(self, variable, old_version, new_version, counter, location, optimizer):
        """An optimizer's ``step()`` (class name ``optimizer``) wrote into parameter ``variable``. Recorded as an
        in-place event only when a live graph saved the old value (the ``optimizer`` event already lists the
        parameters a step updates): then a backward through that graph will fail at the step's line."""
        saved_by = self._stale_savers(counter, new_version)
        if not saved_by:
            return
        event = self._event("inplace", location, variable=self.live_variables[variable].id,
                            op=f"{optimizer}.step", old_version=old_version, new_version=new_version, node=None,
                            saved_by=saved_by)
        self.groups.pin_event(event)
        for n in saved_by:
            self.groups.pin_node(self.nodes.get(n))

    def watched_inplace(self, variable, op, old_version, new_version, location, saved_by):
        """An in-place write seen on a light iteration (``variable``: a key, reported first), found after the fact
        to have changed what the live nodes ``saved_by`` (node ids) saved: a backward through them failed on it.
        The same ``inplace`` event a full iteration records at the write, with its line."""
        ids = list(saved_by)
        event = self._event("inplace", location, variable=self.live_variables[variable].id, op=op,
                            old_version=old_version, new_version=new_version, node=None, saved_by=ids)
        self.groups.pin_event(event)
        for n in ids:
            self.groups.pin_node(self.nodes.get(n))

    def _stale_savers(self, counter, new_version):
        """Live, unfreed nodes that saved this storage at an older version: backward through them will fail."""
        savers = self.saved_counters.get(counter)
        if not savers:
            return []
        found = []
        for rec in list(savers.values()):
            if not rec.alive or rec.freed:
                continue
            if any(c == counter and v < new_version for c, v in rec.counters or ()):
                found.append(rec.id)
        return found

    def _silent_savers(self, storage, counter, stale):
        """Live, unfreed nodes that saved ``storage`` under a version counter other than ``counter``."""
        found = []
        for rec in list(self.saved_storages[storage].values()):
            if rec.alive and not rec.freed and rec.id not in stale \
                    and any(s == storage and c != counter for s, c in rec.storages or ()):
                found.append(rec.id)
        return found

    def numpy_handout(self, variable, storage, location):
        """A numpy array sharing ``storage``'s memory was handed out from ``variable`` (``.numpy()``). When a live,
        unfreed node saved that memory, returns a token for ``numpy_write`` (the adapter copies the saved values
        now and compares them when backward reaches the node); else None: nothing needs watching."""
        if storage not in self.saved_storages:
            return None
        token = next(self._handout_ids)
        self._handouts[token] = [self.live_variables[variable].id, location, None]
        return token

    def numpy_handout_done(self, token):
        """Hand-out ``token`` is no longer watched (the nodes that saved its memory ran backward, or died)."""
        self._handouts.pop(token, None)

    def numpy_write(self, token, node):
        """Backward reached node ``node`` (a key), which saved the memory of hand-out ``token``, and found the
        saved values changed since the array was handed out: something wrote into the array in between. One
        ``numpy_write`` event per hand-out and backward call, at the hand-out's line."""
        entry = self._handouts.get(token)
        rec = self.live_nodes.get(node)
        if entry is None or rec is None:
            return
        b = self.backward
        bid = None if b is None else b["id"]
        variable, location, event = entry
        if event is not None and event["backward"] == bid:
            if rec.id not in event["saved_by"]:
                event["saved_by"].append(rec.id)
                self.groups.pin_node(rec)
            return
        entry[2] = event = self._event("numpy_write", location, variable=variable, saved_by=[rec.id], backward=bid,
                                       backward_location=None if b is None else b["location"])
        self.groups.pin_event(event)
        self.groups.pin_node(rec)

    def light_numpy_write(self, variable, location, nodes, backward_location):
        """A light iteration's watch found a numpy array handed out at ``location`` from ``variable`` (a key)
        written before the backward at ``backward_location`` started: ``nodes`` (keys) saved that memory and are
        about to read the changed values. The ``numpy_write`` event ``numpy_write`` records, with no backward
        record (the light backward has none)."""
        recs = [self.live_nodes[k] for k in nodes if k in self.live_nodes]
        if not recs:
            return
        event = self._event("numpy_write", location, variable=self.live_variables[variable].id,
                            saved_by=[r.id for r in recs], backward=None, backward_location=backward_location)
        self.groups.pin_event(event)
        for rec in recs:
            self.groups.pin_node(rec)

    def cut(self, source, how, location, result=None):
        """A value left the graph: ``how`` is ``"detach"``, ``"data"``, ``"numpy"``, ``"item"`` or ``"tolist"``;
        ``result`` the key of the new variable (reported first with ``variable``), the source's own key for
        ``detach_()``, or None for a plain value. Returns the id of the variable the value now belongs to (what
        a later ``variable(..., source=)`` re-wrapping it points back at)."""
        srec = self.live_variables[source]
        rid = None
        if result is not None:
            if result == source:  # detach_(): the variable itself left the graph
                rid = srec.id
                srec.node = None
                srec.is_leaf = True
            else:
                rrec = self.live_variables[result]
                rrec.source = srec.id
                rid = rrec.id
        self._event("detach", location, source=srec.id, result=rid, how=how)
        return rid if rid is not None else srec.id

    def wrapped(self, key, source_id):
        """The new variable ``key`` wraps memory cut from variable ``source_id`` (``Variable(y.data)``)."""
        rec = self.live_variables.get(key)
        if rec is not None:
            rec.source = source_id

    def hook(self, variable, event, location, *, hook_name=None, hook_location=None, retain_grad=False):
        """A tensor hook was registered (``event="register"``), called (``"call"``) or removed (``"remove"``);
        ``retain_grad()`` counts as one with ``retain_grad=True``. ``hook_location`` is ``{"file", "line"}``."""
        fields = {"variable": None if variable is None else self.live_variables[variable].id, "event": event,
                  "retain_grad": retain_grad, "hook_name": hook_name, "hook_location": hook_location}
        if event == "call" and self.backward is not None:
            fields["backward"] = self.backward["id"]
        self._event("hook", location, **fields)

    def grad_read(self, variable, location, *, was_none, is_leaf, retains_grad, requires_grad, name=None):
        """User code read ``.grad`` of ``variable`` (not the engine's or gradviz's own reads): ``was_none`` is
        what it got; ``name`` what the user's frame calls the variable, if the record has no name yet."""
        rec = self.live_variables[variable]
        if rec.name is None and name is not None:
            rec.name = name
        event = self._event("grad_read", location, variable=rec.id, was_none=was_none, is_leaf=is_leaf,
                            retains_grad=retains_grad, requires_grad=requires_grad)
        self._last_grad_read = event
        if was_none and not is_leaf:
            self.groups.pin_event(event)

    def grad_write(self, variable, location, *, is_none):
        """User code assigned ``.grad`` of ``variable``."""
        vid = self.live_variables[variable].id
        if self.groups.hold and self.groups.held:
            self._release_hold()
        self._event("grad_write", location, variable=vid, is_none=is_none)
        self.grad_ledger.reset(vid)

    def optimizer(self, event, location, optimizer, parameters):
        """An optimizer (class name ``optimizer``) ran ``"step"`` or ``"zero_grad"`` over ``parameters``
        (variable keys, reported first); a module's ``zero_grad()`` reports with its class name. A step ends
        the iteration."""
        groups = self.groups
        if event == "zero_grad":
            if groups.hold and groups.held:
                self._release_hold()
            groups.zero_grad()
        live = self.live_variables
        eid = next(self._event_ids)  # _event, inline: twice per training step
        record = {"id": eid, "seq": next(self._seq), "kind": "optimizer", "location": location,
                  "iteration": groups.iteration, "event": event, "optimizer": optimizer,
                  "parameters": [live[k].id for k in parameters]}
        self.events[eid] = record
        groups.note_event(record)
        ledger = self.grad_ledger
        if event == "zero_grad":
            for p in record["parameters"]:
                ledger.reset(p)
        elif event == "step":
            if groups.hold:
                groups.first_step()
            summed = ledger.step(record, record["parameters"])
            if summed:  # a gradient summed across steps: kept whatever the window (see grad_ledger)
                record["summed_grads"] = summed
                groups.pin_event(record)
            groups.boundary()
            if self.schedule.light:  # one numbering: the light iterations end at steps, so do the full ones
                groups.step_bounded = True

    def _event(self, kind, location, **fields):
        eid = next(self._event_ids)
        event = {"id": eid, "seq": next(self._seq), "kind": kind, "location": location,
                 "iteration": self.groups.iteration}
        event.update(fields)
        self.events[eid] = event
        self.groups.note_event(event)
        return event

    # ----- backward -------------------------------------------------------------------------------------------
    def backward_begin(self, roots, root_nodes, location, *, retain_graph, kind="backward", gradient_none=False):
        """``backward`` (``kind="backward"``) or ``autograd.grad`` (``"grad"``) starts from the variables
        ``roots`` (keys, reported first) whose nodes are ``root_nodes`` (keys or None); ``retain_graph`` as
        given (None: not given); ``gradient_none`` when a root's explicit gradient was None (then a ``None``
        ``.grad`` read on the same line is what it came from)."""
        live = self.live_variables
        nodes = self.live_nodes
        groups = self.groups
        bid = len(self.backwards) + groups.dropped["backwards"]
        gradient_from = None
        read = self._last_grad_read
        if gradient_none and read is not None and read["location"] == location and read["was_none"]:
            gradient_from = read["id"]
        b = {"id": bid, "seq": next(self._seq), "iteration": groups.iteration, "roots": [live[r].id for r in roots],
             "root_nodes": [None if n is None else nodes[n].id for n in root_nodes],
             "retain_graph": bool(retain_graph), "started": retain_graph is not None, "kind": kind,
             "location": location, "visited": [], "grad_norms": {}, "leaf_grad_norms": {},
             "gradient_from": gradient_from, "error": None, "freed_nodes": 0, "thread": self.thread()}
        self.backward = b
        self._visited = b["visited"]  # appended to by every backward step
        self._grad_norms = b["grad_norms"]
        self.backwards[bid] = b
        groups.note_backward(b)
        if not self._nonfinite_loss_pinned:
            for n in root_nodes:
                rec = None if n is None else nodes[n]
                if rec is not None and rec.nonfinite is not None:  # a NaN/Inf loss
                    self._nonfinite_loss_pinned = True
                    groups.pin_backward(b)
                    break

    def backward_step(self, node, norm, nonfinite=False):
        """Backward ran node ``node`` (reported first); ``norm`` is the L2 norm of the gradient it received
        (a float, NaN/Inf allowed; None when the adapter does not measure it), ``nonfinite`` whether that
        gradient holds NaN/Inf."""
        rec = self.live_nodes[node]
        nid = rec.id
        self._visited.append(nid)
        if self._silent_pending and nid in self._silent_pending:
            self._silent_used(nid)
        if norm is not None:
            self._grad_norms[nid] = norm
        if nonfinite:
            self._nonfinite(rec, "backward")

    def _silent_used(self, nid):
        """Backward ran a node whose saved values were silently changed: it used them (the diagnosis's proof)."""
        b = self.backward
        for event in self._silent_pending.pop(nid):
            if event["silent_backward"] is None:  # its location too: the backward's record may leave the window
                event["silent_backward"] = b["id"]
                event["silent_backward_location"] = b["location"]

    def accumulate(self, variable, norm, nonfinite=False, grad=None):
        """Backward added a gradient of L2 norm ``norm`` (None: not measured) into the leaf ``variable``'s
        ``.grad``; ``grad`` is the key of the ``.grad`` variable when backward just made it (reported with
        ``variable(..., origin="grad")``)."""
        b = self.backward
        rec = self.live_variables[variable]
        fresh = False
        if grad is not None:
            made = self.live_variables.get(grad)
            if made is not None and made.origin == "grad":
                made.source = rec.id
                fresh = True
        if b is None:
            return
        self._ledger_pending.append((rec.id, fresh))  # GradLedger.accumulate, inline: once per leaf per backward
        if norm is not None:
            b["leaf_grad_norms"][rec.id] = norm
        acc = rec.accumulator
        if acc is not None:
            if nonfinite:
                acc_rec = self.nodes.get(acc)
                if acc_rec is not None:
                    self._nonfinite(acc_rec, "backward")
            self._visited.append(acc)
            if norm is not None:
                self._grad_norms[acc] = norm

    def buffers_freed(self, node):
        """Backward released node ``node``'s saved tensors (no ``retain_graph``)."""
        rec = self.live_nodes.get(node)
        if rec is None:
            return
        rec.freed = True
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
        if rec.counters or rec.storages:
            if self._unindexed.pop(rec.id, None) is not None:  # _forget_index's usual case, inline
                rec.counters = rec.storages = None
            else:
                self._forget_index(rec)
        b = self.backward
        if b is not None and rec.freed_by is None:
            rec.freed_by = bid = b["id"]
            b["freed_nodes"] += 1
            graph = rec.graph
            if graph is not None and graph.freed_by is None:
                graph.freed_by = bid
                graph.freed_at_iteration = self.groups.iteration

    def backward_end(self, error=None):
        """Backward finished. ``error`` describes what it raised, or is None: ``{"type", "message"}`` plus, when
        known, ``"node"`` (a node key), ``"variable"`` (a variable key), ``"index"``, ``"expected"``,
        ``"current"``; ``"code"`` (the diagnostic code that explains it) is found from the type's name or the message
        (``document.vocabulary.error_code``: PyTorch's wording is recognised too) unless given."""
        b = self.backward
        if b is None:
            return
        if error is not None:
            kind = error.get("type")
            info = {"type": kind, "message": error.get("message"), "code": error.get("code") or error_code(error)}
            for name, value in error.items():
                if name in info:
                    continue
                if name == "node":
                    rec = self.live_nodes.get(value)
                    value = None if rec is None else rec.id
                elif name == "variable":
                    rec = self.live_variables.get(value)
                    value = None if rec is None else rec.id
                info[name] = value
            b["error"] = info
            self.groups.pin_backward(b)
        self.grad_ledger.backward_end(b, error is None)
        self.groups.backward_done(b)
        self.backward = None

    # ----- the schedule: full and light iterations (tracing/schedule.py) ---------------------------------------
    def use_schedule(self, schedule):
        """Trace on ``schedule`` (a ``Schedule``), before any fact; ``starts_full()`` says how iteration 0 runs."""
        self.schedule = schedule
        if schedule.light:  # a REINFORCE episode of 500 steps is one iteration: its splits may all fold back
            self.groups.chain_limit = LIGHT_CHAIN_LIMIT
        if schedule.light and schedule.why_full(0):
            schedule.full[0] = schedule.why_full(0)
        if schedule.light and 0 in schedule.full:  # (a first iteration traced in full sees the resets that end it)
            self.groups.hold = HOLD_BACKWARDS

    def starts_full(self):
        return not self.schedule.light or 0 in self.schedule.full

    def current_iteration(self):
        """The iteration running now (the one after a boundary that no op has opened yet)."""
        g = self.groups
        return g.iteration + 1 if g.pending else g.iteration

    def step_ended(self, signature, light):
        """An iteration ended (an optimizer step; a backward when the loop has no optimizer). ``signature``: a
        cheap description of its structure (any hashable, the adapter's); ``light``: whether it ran light.
        Returns True when the next iteration is to be full."""
        g = self.groups
        schedule = self.schedule
        watch = self.light
        if light:
            if g.pending:
                g.begin_iteration()
            it = g.iteration
            schedule.light_count += 1
            if watch.alive(it, g.graphs_alive + watch.graphs):
                schedule.fire(it, "growth")
        else:
            it = g.iteration
            watch.last_full_bytes = sum(gr.saved_bytes for gr in g.iteration_graphs(it) if gr.parent is None)
        g.ended_point = point = g.point(it)
        if light:  # its ops were not recorded: the peak during it is not known (graphs alive and their estimate are)
            del point["peak_retained_bytes"]
            point["measured"] = False
        g.pending = True
        new = schedule.seen(signature)
        why = schedule.why_full(it + 1, new and light)
        if why is not None and schedule.light:
            schedule.full[it + 1] = why
        return why is not None

    def light_finding(self):
        """A light iteration's watch saw one of the rare calls where a mistake happens (a non-leaf's ``.grad``
        read, a write through ``.data``, a backward that raised): its facts are about to be recorded, in this
        iteration, and the next iterations are full."""
        g = self.groups
        if g.pending:
            g.begin_iteration()
        self.schedule.fire(g.iteration, "finding")

    def _release_hold(self):
        """Gradients reset between the backward calls held for a first step (``zero_grad``, ``p.grad = None``,
        ``p.grad.zero_()``): nothing is accumulated across them (a loop that updates by hand), so each ended an
        iteration, as a loop without an optimizer counts (``Grouping.release``)."""
        groups = self.groups
        groups.release()
        why = self.schedule.why_full(groups.iteration + 1)  # (what step_ended said of the next one)
        if why is not None:
            self.schedule.full[groups.iteration + 1] = why

    def light_event(self):
        """A light iteration's watch records a fact that is no finding (a hook registered): it belongs to this
        iteration, which the next op would have opened."""
        if self.groups.pending:
            self.groups.begin_iteration()

    def light_summed(self, optimizer, location, summed, backward_location):
        """A light optimizer step (class name ``optimizer``, at ``location``) summed gradients across steps:
        ``summed`` is ``[(parameter key, the line of the step before)]`` (reported first), ``backward_location``
        the line of the last backward before it. Recorded as the step event a full iteration records, with its
        ``summed_grads`` (no backward or step record stands behind them: their ids are null)."""
        g = self.groups
        if g.pending:
            g.begin_iteration()
        live = self.live_variables
        by_step = {}
        for key, previous in summed:
            by_step.setdefault(previous, []).append(live[key].id)
        record = self._event("optimizer", location, event="step", optimizer=optimizer,
                             parameters=[p for ids in by_step.values() for p in ids])
        record["summed_grads"] = [{"parameters": ids, "backward": None, "backward_location": backward_location,
                                   "previous_step": None, "previous_step_location": previous,
                                   "previous_optimizer": optimizer} for previous, ids in by_step.items()]
        g.pin_event(record)
        self.schedule.fire(g.iteration, "finding")

    def light_loss(self, value, location, *, op=None, phase=None, op_location=None, data=None):
        """A light iteration's backward started from a root that is not finite (``value``: its float, or None);
        ``op``/``phase``/``op_location``: the node that made it, as its graph tells (``LightSteps.nonfinite_root``);
        ``data``: (name, Location) of the line that made the value it came in with (``nonfinite_data``)."""
        it = self.current_iteration()
        if self.light.loss(it, value, location, op=op, phase=phase, op_location=op_location, data=data):
            self.schedule.fire(it, "nonfinite")

    def light_norms(self, norms, location):
        """A light iteration's optimizer step: ``norms`` [(parameter key, name or None, gradient norm)]."""
        it = self.current_iteration()
        if self.light.grad_norms(it, norms, location):
            self.schedule.fire(it, "nonfinite")

    def light_graph(self, nbytes, born):
        """A graph built on a light iteration was seen (``born``) or died; ``nbytes``: what it is estimated to
        hold (0 once a non-retaining backward freed it)."""
        watch = self.light
        if born:
            watch.graphs += 1
            watch.nbytes += nbytes
        else:
            watch.graphs -= 1
            watch.nbytes -= nbytes

    def light_freed(self, nbytes):
        """A backward without retain_graph freed what a light graph was estimated to hold."""
        self.light.nbytes -= nbytes

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

    # ----- custom Functions ----------------------------------------------------------------------------------------
    def wants_backward_check(self, function_key, signature):
        """Whether the adapter should check this custom Function's backward now (first time per Function and
        input signature, within the run's budget, unless checks are off)."""
        return self.checks.wanted(function_key, signature)

    def backward_check(self, node_key, class_name, signature, result, location, backward_location):
        """The outcome of a backward check (``backward_check.CheckResult``) of node ``node_key``'s Function,
        applied at ``location``; ``backward_location`` is where its backward is defined. A failed check keeps its
        node's graph in the document."""
        rec = self.live_nodes.get(node_key)
        self.checks.record(None if rec is None else rec.id, class_name, signature, result, location,
                           backward_location)
        if result.status == "failed":
            self.groups.pin_node(rec)

    def ddp(self, kind, fields):
        """A DistributedDataParallel fact (``process``, ``module``, ``call_site``, ``forward``, ``step``,
        ``error``: adapters/torch_ddp.py), kept for the document's ``ddp`` section (tracing/ddp_facts.py)."""
        self.ddp_facts.add(kind, fields, self.groups.iteration)

    # ----- the end, and results ---------------------------------------------------------------------------------
    def raised(self, type_name, message, location):
        """The traced block ended with an exception (a summary: no traceback is kept)."""
        self.exception = {"type": type_name, "message": message, "location": location}

    def stop(self):
        """The trace stopped: what is alive and held now is what the document reports as final."""
        self.stopped = True
        self._module_keys = []
        self.groups.freeze()

    @property
    def stats(self):
        """Cheap live counters for a progress line (safe to poll from another thread)."""
        g = self.groups
        return {"backward_calls": len(self.backwards) + g.dropped["backwards"], "iterations": g.iteration + 1,
                "retained_bytes": g.memory.now, "peak_retained_bytes": g.memory.peak, "graphs": g.graph_count,
                "nodes": len(self.nodes) + g.dropped["nodes"]}

    def document(self, with_diagnostics=True):
        """The ``gradviz-trace`` document (docs/trace-format.md), with diagnostics unless told otherwise."""
        from .document import add_diagnostics, build_document

        lock = self.lock
        lock.acquire()  # a consistent snapshot: other threads' facts wait (the diagnostics read the copy)
        try:
            doc = build_document(self, with_diagnostics=False)
        finally:
            lock.release()
        if with_diagnostics:
            add_diagnostics(doc)
        return doc


def _unindex(index, entries, rid):
    """Take node ``rid`` out of ``index`` (key -> {node id: record}) under each key of ``entries`` ((key, _)
    pairs); a key left with no node goes."""
    for key, _ in entries:
        entry = index.get(key)
        if entry is not None:
            entry.pop(rid, None)
            if not entry:
                del index[key]
