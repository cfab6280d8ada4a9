"""``SavedMemory``: what live nodes saved for backward, the memory that holds, and who saved which storage.

A ``TraceBuilder`` collaborator (builder.py), owner of the saver indexes, of which backward freed a node's saved
tensors (``buffers_freed``: one call per node per backward) and of the charging of saved memory to graphs
(``Grouping.memory``, a ``MemoryBook``). A node's saved tensors arrive as ``SavedFact``s (facts.py) and are kept on
its record as tuples of ids and sizes; the indexes say which live, unfreed nodes saved a version counter or a
storage, what an in-place change (version_facts.py) asks to predict a stale or silent read.

The indexes are brought up to date when read (``counters``, ``storages``): a node's saved tensors wait in a queue
(``unindexed``) and are indexed only if the node is still unfreed then. A training step's nodes are saved in
forward and freed by backward before anything asks, so most never enter the indexes.
"""


class SavedMemory:
    """The saved-tensor side of the records: ``hold`` (once per op that saved something), ``describe`` (a node's
    saved tensors reported again), ``buffers_freed`` (backward let them go), ``release``/``forget`` (the node died)."""

    def __init__(self, trace):
        self.trace = trace
        self.live_variables = trace.live_variables
        self.live_nodes = trace.live_nodes
        self.groups = trace.groups
        # version-counter key -> {node id: NodeRecord} of the live, unfreed nodes that saved that storage
        self.by_counter = {}
        # storage key -> {node id: NodeRecord} likewise, by the memory saved (SavedFact.storage)
        self.by_storage = {}
        self.unindexed = {}  # node id -> NodeRecord whose counters and storages are not in those two yet

    @property
    def counters(self):
        """Version-counter key -> ``{node id: NodeRecord}`` of the live, unfreed nodes that saved that storage."""
        if self.unindexed:
            self.index_queued()
        return self.by_counter

    @property
    def storages(self):
        """Storage key -> ``{node id: NodeRecord}`` of the live, unfreed nodes that saved that memory."""
        if self.unindexed:
            self.index_queued()
        return self.by_storage

    def index_queued(self):
        """Index the queued nodes' saved tensors, in the order they were saved (as if indexed then)."""
        queued, self.unindexed = self.unindexed, {}
        by_counter = self.by_counter
        by_storage = self.by_storage
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

    def hold(self, rec, saved):
        """``describe`` for a node holding nothing yet (``GraphFacts.op``'s, once per op): describe ``saved`` and
        charge the memory it holds. ``rec.owners`` is ((block, bytes), ...) of each distinct block; ``rec.counters``
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
            self.unindexed[rec.id] = rec

    def describe(self, rec, saved, freed):
        """Saved-tensor descriptions, and what they hold in memory (charged to the graph while alive): each
        distinct block once, parameters' storage not at all. Replaces what ``rec`` held before."""
        if rec.owners:
            self.release(rec)
        if rec.counters or rec.storages:
            self.forget(rec)
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
                self.unindexed[rec.id] = rec
        else:
            self.hold(rec, saved)

    def release(self, rec):
        owners = rec.owners
        if owners:
            rec.owners = None
            self.groups.memory.release(owners)

    def forget(self, rec):
        """Take a node out of ``saved_counters`` and ``saved_storages``, or out of the queue for them."""
        counters, storages = rec.counters, rec.storages
        rec.counters = rec.storages = None
        if self.unindexed.pop(rec.id, None) is not None:
            return
        if counters:
            _unindex(self.by_counter, counters, rec.id)
        if storages:
            _unindex(self.by_storage, storages, rec.id)

    def stale_savers(self, counter, new_version):
        """Live, unfreed nodes that saved this storage at an older version: backward through them will fail."""
        savers = self.counters.get(counter)
        if not savers:
            return []
        found = []
        for rec in list(savers.values()):
            if not rec.alive or rec.freed:
                continue
            if any(c == counter and v < new_version for c, v in rec.counters or ()):
                found.append(rec.id)
        return found

    def silent_savers(self, storage, counter, stale):
        """Live, unfreed nodes that saved ``storage`` under a version counter other than ``counter``."""
        found = []
        for rec in list(self.storages[storage].values()):
            if rec.alive and not rec.freed and rec.id not in stale \
                    and any(s == storage and c != counter for s, c in rec.storages or ()):
                found.append(rec.id)
        return found


    def buffers_freed(self, node):
        """Backward released node ``node``'s saved tensors (no ``retain_graph``): its memory is no longer charged,
        it saves nothing now, and the backward in progress freed it (the graph too, the first time)."""
        rec = self.live_nodes.get(node)
        if rec is None:
            return
        rec.freed = True
        owners = rec.owners
        if owners:  # release and MemoryBook.release, inline: once per node per backward
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
            if self.unindexed.pop(rec.id, None) is not None:  # forget's usual case, inline
                rec.counters = rec.storages = None
            else:
                self.forget(rec)
        b = self.trace.backward  # (per thread: on the builder)
        if b is not None and rec.freed_by is None:
            rec.freed_by = bid = b["id"]
            b["freed_nodes"] += 1
            graph = rec.graph
            if graph is not None and graph.freed_by is None:
                graph.freed_by = bid
                graph.freed_at_iteration = self.groups.iteration


def _unindex(index, entries, rid):
    """Take node ``rid`` out of ``index`` (key -> {node id: record}) under each key of ``entries`` ((key, _)
    pairs); a key left with no node goes."""
    for key, _ in entries:
        entry = index.get(key)
        if entry is not None:
            entry.pop(rid, None)
            if not entry:
                del index[key]
