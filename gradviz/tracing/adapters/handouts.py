"""Numpy arrays handed out over memory that live nodes saved, watched until backward reaches those nodes.

A write through such an array is seen by no engine call, so each saved value on the handed-out memory is copied
at the hand-out and compared when backward reaches its node (``VersionFacts.numpy_write``). The bookkeeping is
the same on both engines and lives here: which node's saved values are watched, for which hand-out token, and
how many values each token still watches (the builder hears ``numpy_handout_done`` when none is left). What a
saved value is, how to copy it and how to compare it is the adapter's: it hands ``copy`` and ``same`` in, and
names each watched value by a ``where`` of its own (gradviz: the node and position, torch: a byte range).
"""


class HandoutWatch:
    """The watched saved values of one adapter. ``nodes`` (node key -> {position: (copy, token, where)}) is
    read directly on the adapters' backward paths: an empty dict costs one truth test per node."""

    __slots__ = ("builder", "copy", "same", "make_ref", "nodes", "refs", "counts")

    def __init__(self, builder, copy, same, make_ref):
        self.builder = builder
        self.copy = copy  # copy(where): the saved value's contents now
        self.same = same  # same(copy, where): whether the saved value still reads as ``copy``
        self.make_ref = make_ref  # make_ref(owner, key): a weak reference to the node (or its tag)
        self.nodes = {}
        self.refs = {}  # node key -> the weak reference made for it: a dead one ends its watch
        self.counts = {}  # hand-out token -> how many saved values it still watches

    def hand_out(self, skey, storage, location, places):
        """Variable ``skey`` handed out ``storage`` at ``location``; ``places`` yields ``(node key, node, position,
        where)`` for each live saved value on it. A value already watched since an earlier hand-out and still
        unchanged is watched for this one instead (a write found later happened after this line)."""
        token = self.builder.numpy_handout(skey, storage, location)
        if token is None:
            return
        self.prune()
        nodes, refs, counts = self.nodes, self.refs, self.counts
        for key, owner, k, where in places:
            values = nodes.get(key)
            if values is None or refs[key]() is not owner:  # (a node dead since, its id taken by another)
                if values is not None:
                    self.drop(key)
                values = nodes[key] = {}
                refs[key] = self.make_ref(owner, key)
            before = values.get(k)
            if before is not None:
                if not self.same(before[0], before[2]):
                    continue  # written since the earlier hand-out: that one is to blame
                self.release(before[1])
                values[k] = (before[0], token, before[2])
            else:
                values[k] = (self.copy(where), token, where)
            counts[token] = counts.get(token, 0) + 1
        if not counts.get(token):
            self.builder.numpy_handout_done(token)

    def reached(self, key, owner=None):
        """Backward reached node ``key``: report each saved value changed since its hand-out, and stop watching
        the node. ``owner``, when given, must be the node watched (else its id was reused: nothing reported)."""
        values = self.nodes.pop(key, None)
        ref = self.refs.pop(key, None)
        if not values:
            return
        report = owner is None or (ref is not None and ref() is owner)
        same = self.same
        for copy, token, where in values.values():
            if report and not same(copy, where):
                self.builder.numpy_write(token, key)
            self.release(token)

    def drop(self, key):
        """Node ``key`` died or freed what it saved: its hand-outs need no watching."""
        self.refs.pop(key, None)
        for _, token, _ in self.nodes.pop(key, {}).values():
            self.release(token)

    def prune(self):
        """Drop the nodes that died (an engine whose references have no death callback)."""
        for key in [key for key, ref in self.refs.items() if ref() is None]:
            self.drop(key)

    def release(self, token):
        left = self.counts.get(token, 0) - 1
        if left > 0:
            self.counts[token] = left
        else:
            self.counts.pop(token, None)
            self.builder.numpy_handout_done(token)
