"""``VersionFacts``: in-place changes, values cut from the graph, and numpy arrays handed out over saved memory.

A ``TraceBuilder`` collaborator (builder.py), owner of the ``inplace``, ``detach`` and ``numpy_write`` events and
of what waits for a backward to prove a silent change (``silent_pending``: a write through ``.data`` into memory a
node saved, used when backward runs that node). Which live nodes saved a version counter or a storage is asked of
``SavedMemory`` (saved_memory.py); events go into the builder's one event log (``record_event``).
"""

import itertools

from ..document.vocabulary import is_reset_op


class VersionFacts:
    """What changed a value behind the graph's back, and what will notice (see ``inplace``)."""

    def __init__(self, trace):
        self.trace = trace
        self.variables = trace.variables
        self.nodes = trace.nodes
        self.live_variables = trace.live_variables
        self.live_nodes = trace.live_nodes
        self.groups = trace.groups
        self.saved_memory = trace.saved_memory
        self.handouts = {}  # numpy hand-out token -> [variable id, location, its last numpy_write event], watched
        self._handout_ids = itertools.count()
        self.silent_pending = {}  # node id -> inplace events that silently changed what it saved, not yet used

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
        saved_by = self.saved_memory.stale_savers(counter, new_version)
        memory = self.saved_memory
        silent = memory.silent_savers(storage, counter, saved_by) if storage in memory.storages else None
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
        event = self.trace.record_event("inplace", location, variable=vrec.id, op=op, old_version=old_version,
                            new_version=new_version, node=nid, saved_by=saved_by)
        if vrec.origin != "op" and is_reset_op(event):
            self._grad_reset_through(vrec)
            self.trace.iterations.release_hold()
        if silent:
            event["silent_saved_by"] = silent
            event["silent_backward"] = None  # the backward that then used the changed values (backward_step)
            event["silent_backward_location"] = None
            pending = self.silent_pending
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
                    self.trace.grad_ledger.reset(vrec.source)
                return
            if vrec.origin not in ("data", "detach"):
                return
            vrec = self.variables.get(vrec.source)

    def parameter_update(self, variable, old_version, new_version, counter, location, optimizer):
        """An optimizer's ``step()`` (class name ``optimizer``) wrote into parameter ``variable``. Recorded as an
        in-place event only when a live graph saved the old value (the ``optimizer`` event already lists the
        parameters a step updates): then a backward through that graph will fail at the step's line."""
        saved_by = self.saved_memory.stale_savers(counter, new_version)
        if not saved_by:
            return
        event = self.trace.record_event("inplace", location, variable=self.live_variables[variable].id,
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
        event = self.trace.record_event("inplace", location, variable=self.live_variables[variable].id, op=op,
                            old_version=old_version, new_version=new_version, node=None, saved_by=ids)
        self.groups.pin_event(event)
        for n in ids:
            self.groups.pin_node(self.nodes.get(n))

    def numpy_handout(self, variable, storage, location):
        """A numpy array sharing ``storage``'s memory was handed out from ``variable`` (``.numpy()``). When a live,
        unfreed node saved that memory, returns a token for ``numpy_write`` (the adapter copies the saved values
        now and compares them when backward reaches the node); else None: nothing needs watching."""
        if storage not in self.saved_memory.storages:
            return None
        token = next(self._handout_ids)
        self.handouts[token] = [self.live_variables[variable].id, location, None]
        return token

    def numpy_handout_done(self, token):
        """Hand-out ``token`` is no longer watched (the nodes that saved its memory ran backward, or died)."""
        self.handouts.pop(token, None)

    def numpy_write(self, token, node):
        """Backward reached node ``node`` (a key), which saved the memory of hand-out ``token``, and found the
        saved values changed since the array was handed out: something wrote into the array in between. One
        ``numpy_write`` event per hand-out and backward call, at the hand-out's line."""
        entry = self.handouts.get(token)
        rec = self.live_nodes.get(node)
        if entry is None or rec is None:
            return
        b = self.trace.backward
        bid = None if b is None else b["id"]
        variable, location, event = entry
        if event is not None and event["backward"] == bid:
            if rec.id not in event["saved_by"]:
                event["saved_by"].append(rec.id)
                self.groups.pin_node(rec)
            return
        entry[2] = event = self.trace.record_event("numpy_write", location, variable=variable, saved_by=[rec.id],
                                                   backward=bid,
                                                   backward_location=None if b is None else b["location"])
        self.groups.pin_event(event)
        self.groups.pin_node(rec)

    def light_numpy_write(self, variable, location, nodes, backward_location):
        """A light iteration's watch found a numpy array handed out at ``location`` from ``variable`` (a key)
        written before the backward at ``backward_location`` started: ``nodes`` (keys) saved that memory and are
        about to read the changed values. The event ``numpy_write`` records, with no backward record (the light
        backward has none)."""
        recs = [self.live_nodes[k] for k in nodes if k in self.live_nodes]
        if not recs:
            return
        event = self.trace.record_event("numpy_write", location, variable=self.live_variables[variable].id,
                                        saved_by=[r.id for r in recs], backward=None,
                                        backward_location=backward_location)
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
        self.trace.record_event("detach", location, source=srec.id, result=rid, how=how)
        return rid if rid is not None else srec.id

    def wrapped(self, key, source_id):
        """The new variable ``key`` wraps memory cut from variable ``source_id`` (``Variable(y.data)``)."""
        rec = self.live_variables.get(key)
        if rec is not None:
            rec.source = source_id

    def silent_used(self, nid):
        """Backward ran a node whose saved values were silently changed: it used them (the diagnosis's proof)."""
        b = self.trace.backward
        for event in self.silent_pending.pop(nid):
            if event["silent_backward"] is None:  # its location too: the backward's record may leave the window
                event["silent_backward"] = b["id"]
                event["silent_backward_location"] = b["location"]

