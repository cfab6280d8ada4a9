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
from operator import attrgetter
from threading import get_ident

from .checks import BackwardChecks
from .ddp_facts import DdpFacts
from .facts import LEAF, OutputFact, SavedFact
from .grad_facts import GradFacts
from .grad_ledger import GradLedger
from .graph_facts import GraphFacts
from .grouping import Grouping
from .iteration_facts import IterationFacts
from .records import safe_message
from .saved_memory import SavedMemory
from .thread_facts import ThreadBook, ThreadState
from .training_facts import TrainingFacts
from .version_facts import VersionFacts

__all__ = ["LEAF", "OutputFact", "SavedFact", "ThreadState", "TraceBuilder"]


def _fact(collaborator, method):
    """A fact method the builder offers and ``collaborator`` (an attribute of the builder) owns:
    ``TraceBuilder.op`` calls ``self.graph_facts.op``. ``TraceBuilder.__init__`` puts the collaborator's bound
    method on each instance instead, so an adapter's call reaches the fact with no frame between, unless a
    subclass or a test replaced the method on the class (then this one runs, and forwards)."""
    name = method.__name__

    def fact(self, *args, **kwargs):
        return getattr(getattr(self, collaborator), name)(*args, **kwargs)

    fact.__name__ = name
    fact.__qualname__ = f"TraceBuilder.{name}"
    fact.__doc__ = method.__doc__
    fact.collaborator = collaborator
    return fact


class TraceBuilder:
    """Everything the tracer knows, built from facts. See the module docstring for the conventions.

    Adapters may read (never write) ``live_variables`` and ``live_nodes`` (key -> record, while the object
    lives; a record's ``id`` is its document id), ``saved_counters`` and ``saved_storages`` (the version-counter
    and storage keys some live, unfreed node saved) to avoid a method call on their hot paths.

    Those two indexes are brought up to date when read (properties): a node's saved tensors wait in a queue and
    are indexed only if the node is still unfreed then. A training step's nodes are saved in forward and freed by
    backward before anything asks (an in-place change, an optimizer's update), so most never enter the indexes.

    The builder is the surface; each section of facts is owned by one collaborator, written in its own module
    (``graph_facts``, ``saved_memory``, ``versions``, ``grads``, ``iterations``, ``thread_book``, and ``groups``
    for graphs and iterations), and named in the class body below (``op = _fact("graph_facts", GraphFacts.op)``).
    The builder itself keeps the record tables, the lock and per-thread state, the event log, and the small
    sections (engine, modules, unseen, internal errors, custom Functions' checks, DDP, the end).
    """

    def __init__(self, window=3):
        self.window = window
        self.script = None
        self.exception = None  # what ended the traced block, if it raised
        self.holders = []  # the user's containers holding graph outputs when the trace stopped (holders.py)
        self.stopped = False
        self.engines = {}  # engine name -> {"name", "version", "devices"}
        # the record tables, shared by reference with the collaborators (never rebound)
        self.variables = {}  # record id -> VarRecord (the document's; dropped records leave this table)
        self.nodes = {}  # record id -> NodeRecord
        self.live_variables = {}  # adapter key -> VarRecord, while the variable lives
        self.live_nodes = {}  # adapter key -> NodeRecord, while the node lives
        # the event log (record_event), and one order shared by events and backward calls
        self.event_ids = itertools.count()
        self.seq = itertools.count()
        self.events = {}  # event id -> dict
        self.backwards = {}  # backward id -> dict
        # per thread (ThreadState, switched by switch_thread): read and written by the collaborators
        self.backward = None  # the backward call in progress (its dict)
        self.visited = self.grad_norms = None  # its "visited" list and "grad_norms" dict
        self.module_stack = ()  # module call stack: paths, outermost first
        self._module_keys = []  # (module key, the stack before it was entered), innermost last
        self.last_grad_read = None
        self.modules = {}  # path -> class name, for every module call seen
        self.grad_ledger = GradLedger()  # every .grad reset, accumulation and step, for summed_grads
        self.internal_errors = []
        self._unseen = {}  # (kind, what, how, location) -> entry of the document's "unseen" list
        self.checks = BackwardChecks()  # custom Functions' backward checks (wrong-backward)
        self.ddp_facts = DdpFacts()  # what DistributedDataParallel did on this rank (the "ddp" section)
        self.training = TrainingFacts()  # train/eval modes, calls and switches (the "training" section)
        self.groups = Grouping(self)  # graphs, iterations, structures, the window, retained memory
        # the collaborators, one owner per section of the facts (in this order: each may use the ones before)
        self.saved_memory = SavedMemory(self)  # saved tensors, their memory, who saved which storage
        self.graph_facts = GraphFacts(self)  # variables, nodes, their ids, where they go
        self.versions = VersionFacts(self)  # in-place changes, cuts, numpy hand-outs
        self.grads = GradFacts(self)  # backward calls, .grad, hooks, optimizers, NaN/Inf
        self.iterations = IterationFacts(self)  # full and light iterations
        self.thread_book = ThreadBook()  # every thread's state, the threads seen and not seen
        self.threads = self.thread_book.threads
        cls = type(self)
        on_class = _ON_CLASS(cls)  # the class's fact methods now (a test or a subclass may replace one)
        wiring = _WIRING.get(cls)
        if wiring is None or wiring[0] != on_class:
            wiring = _WIRING[cls] = (on_class, _wiring(cls))
        own = vars(self)
        for collaborator, names, methods in wiring[1]:  # one C call per collaborator (a trace starts per step)
            own.update(zip(names, methods(own[collaborator])))
        # threads: the lock around facts
        self.lock = threading.RLock()
        if cls.release is TraceBuilder.release:  # the lock's own: no Python frame per fact
            self.release = self.lock.release
        self.thread_ident = get_ident()

    @property
    def saved_counters(self):
        """Version-counter key -> ``{node id: NodeRecord}`` of the live, unfreed nodes that saved that storage."""
        memory = self.saved_memory
        if memory.unindexed:
            memory.index_queued()
        return memory.by_counter

    @property
    def saved_storages(self):
        """Storage key -> ``{node id: NodeRecord}`` of the live, unfreed nodes that saved that memory."""
        memory = self.saved_memory
        if memory.unindexed:
            memory.index_queued()
        return memory.by_storage

    @property
    def schedule(self):
        """The ``Schedule`` (which iterations are full), ``IterationFacts``'."""
        return self.iterations.schedule

    @property
    def light(self):
        """The ``LightWatch`` (what light iterations found), ``IterationFacts``'."""
        return self.iterations.light

    @property
    def first_nonfinite(self):
        """The first NaN/Inf seen (``{"node", "phase", "iteration", "backward"}``) or None, ``GradFacts``'."""
        return self.grads.first_nonfinite

    @property
    def lasti(self):
        """The instruction of the last op's call, ``GraphFacts``'."""
        return self.graph_facts.lasti

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
        book = self.thread_book
        old = book.current
        old.backward, old.visited, old.grad_norms = self.backward, self.visited, self.grad_norms
        old.module_stack, old.module_keys, old.last_grad_read = self.module_stack, self._module_keys, \
            self.last_grad_read
        new = book.load()
        self.backward, self.visited, self.grad_norms = new.backward, new.visited, new.grad_norms
        self.module_stack, self._module_keys, self.last_grad_read = new.module_stack, new.module_keys, \
            new.last_grad_read
        self.thread_ident = get_ident()

    thread = _fact("thread_book", ThreadBook.thread)
    note_running_threads = _fact("thread_book", ThreadBook.note_running_threads)
    note_thread = _fact("thread_book", ThreadBook.note_thread)
    unobserved_threads = _fact("thread_book", ThreadBook.unobserved_threads)

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

    # ----- variables and nodes (``GraphFacts``, graph_facts.py) ---------------------------------------------------
    variable = _fact("graph_facts", GraphFacts.variable)
    variable_died = _fact("graph_facts", GraphFacts.variable_died)
    variable_handle_died = _fact("graph_facts", GraphFacts.variable_handle_died)
    variable_state = _fact("graph_facts", GraphFacts.variable_state)
    name_variables = _fact("graph_facts", GraphFacts.name_variables)
    parameter_names = _fact("graph_facts", GraphFacts.parameter_names)
    op = _fact("graph_facts", GraphFacts.op)
    unrecorded_op = _fact("graph_facts", GraphFacts.unrecorded_op)
    external_node = _fact("graph_facts", GraphFacts.external_node)
    node_inputs = _fact("graph_facts", GraphFacts.node_inputs)
    node_saved = _fact("graph_facts", GraphFacts.node_saved)
    node_died = _fact("graph_facts", GraphFacts.node_died)
    node_handle_died = _fact("graph_facts", GraphFacts.node_handle_died)
    existing_output = _fact("graph_facts", GraphFacts.existing_output)


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

    # ----- the event log ------------------------------------------------------------------------------------------
    def record_event(self, kind, location, **fields):
        """An event of ``kind`` at ``location`` (the document's ``events``), in the order shared with backward calls."""
        eid = next(self.event_ids)
        event = {"id": eid, "seq": next(self.seq), "kind": kind, "location": location,
                 "iteration": self.groups.iteration}
        event.update(fields)
        self.events[eid] = event
        self.groups.note_event(event)
        return event

    # ----- in-place changes, cuts, numpy hand-outs (``VersionFacts``, version_facts.py) ---------------------------
    inplace = _fact("versions", VersionFacts.inplace)
    parameter_update = _fact("versions", VersionFacts.parameter_update)
    watched_inplace = _fact("versions", VersionFacts.watched_inplace)
    numpy_handout = _fact("versions", VersionFacts.numpy_handout)
    numpy_handout_done = _fact("versions", VersionFacts.numpy_handout_done)
    numpy_write = _fact("versions", VersionFacts.numpy_write)
    light_numpy_write = _fact("versions", VersionFacts.light_numpy_write)
    cut = _fact("versions", VersionFacts.cut)
    wrapped = _fact("versions", VersionFacts.wrapped)

    # ----- backward, .grad, hooks, optimizers (``GradFacts``, grad_facts.py) --------------------------------------
    backward_begin = _fact("grads", GradFacts.backward_begin)
    backward_step = _fact("grads", GradFacts.backward_step)
    accumulate = _fact("grads", GradFacts.accumulate)
    buffers_freed = _fact("saved_memory", SavedMemory.buffers_freed)
    backward_end = _fact("grads", GradFacts.backward_end)
    nonfinite_output = _fact("grads", GradFacts.nonfinite_output)
    nonfinite_data = _fact("grads", GradFacts.nonfinite_data)
    hook = _fact("grads", GradFacts.hook)
    grad_read = _fact("grads", GradFacts.grad_read)
    grad_write = _fact("grads", GradFacts.grad_write)
    optimizer = _fact("grads", GradFacts.optimizer)

    # ----- the schedule: full and light iterations (``IterationFacts``, iteration_facts.py) -----------------------
    use_schedule = _fact("iterations", IterationFacts.use_schedule)
    starts_full = _fact("iterations", IterationFacts.starts_full)
    current_iteration = _fact("iterations", IterationFacts.current_iteration)
    step_ended = _fact("iterations", IterationFacts.step_ended)
    light_finding = _fact("iterations", IterationFacts.light_finding)
    light_event = _fact("iterations", IterationFacts.light_event)
    light_summed = _fact("iterations", IterationFacts.light_summed)
    light_loss = _fact("iterations", IterationFacts.light_loss)
    light_norms = _fact("iterations", IterationFacts.light_norms)
    light_graph = _fact("iterations", IterationFacts.light_graph)
    light_freed = _fact("iterations", IterationFacts.light_freed)

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
        ``error``: adapters/torch/ddp.py), kept for the document's ``ddp`` section (tracing/ddp_facts.py)."""
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



_FACTS = {name: value for name, value in vars(TraceBuilder).items() if hasattr(value, "collaborator")}
_ON_CLASS = attrgetter(*_FACTS)  # a class -> its attributes of those names, in one call
_WIRING = {}  # builder class -> (_ON_CLASS(class), _wiring(class)) as last worked out


def _wiring(cls):
    """``(collaborator, names, attrgetter of those names)`` for each collaborator owning fact methods that
    ``cls`` did not replace (what ``__init__`` binds on each instance); worked out once per class."""
    names = {}
    for name, fact in _FACTS.items():
        if getattr(cls, name) is fact:
            names.setdefault(fact.collaborator, []).append(name)
    return tuple((collaborator, tuple(found), attrgetter(*found) if len(found) > 1 else _one(found[0]))
                 for collaborator, found in names.items())


def _one(name):
    """An ``attrgetter`` of one name that gives a 1-tuple, like that of several names gives a tuple."""
    get = attrgetter(name)
    return lambda obj: (get(obj),)
