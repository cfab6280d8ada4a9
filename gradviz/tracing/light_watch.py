"""What a light iteration's watch remembers, the same on every engine (docs/how-it-works.md, "What a light
iteration watches"): the cuts of values that require grad (``.data``, ``detach()``), weakly; the in-place writes,
weakly, each with its line and the versions it moved between, so that a stale-version error at a later backward is
traced back to the write that made it; and the numpy arrays taken from cuts of a graph's values, with a copy of
their bytes, so that a write through one is seen at the next backward. Each adapter's watch reads its engine's
tensors and hands these their own objects (a tensor, a Variable); nothing here touches an engine.
"""

import weakref
from collections import deque

WRITE_LOG = 256  # in-place writes remembered (a stale-version error is traced back to one of them)
ALIAS_LIMIT = 1024  # cut results remembered
HANDOUT_LIMIT = 16  # numpy arrays on a graph's values watched until the next backward
HANDOUT_BYTES = 1 << 24  # larger ones are not copied (the report says nothing of them on a light iteration)


class Write:
    """One in-place write seen on a light iteration: its tensor (weakly), op, versions before and after, line."""
    __slots__ = ("ref", "op", "old", "new", "location")

    def __init__(self, value, op, old, new, location):
        self.ref = weakref.ref(value)
        self.op, self.old, self.new, self.location = op, old, new, location


class WatchMemory:
    """The cut results and the in-place writes of the light iterations."""

    def __init__(self):
        self.writes = deque(maxlen=WRITE_LOG)
        self.aliases = {}  # id(cut result) -> (weak ref to it, weak ref to its source, "data" or "detach")
        self.handouts = deque(maxlen=HANDOUT_LIMIT)  # HandOut, until the next backward

    def handout(self, source, value, array, location, how):
        """``array`` (numpy) shares the memory of ``value``, a cut of ``source`` made ``how``, which a graph may
        still need: its bytes are copied, to be compared at the next backward (``changed_handouts``). Kept
        strongly until then: ``t.numpy()[0] = 0`` drops the array at once."""
        if array.nbytes <= HANDOUT_BYTES:
            self.handouts.append((source, value, array, array.copy(), location, how))

    def changed_handouts(self):
        """``[(source, value, array, location, how)]`` for the arrays written since they were handed out; every
        hand-out is forgotten (a backward is starting: what it reads is decided now)."""
        changed = [(source, value, array, location, how) for source, value, array, copy, location, how
                   in self.handouts if array.tobytes() != copy.tobytes()]
        self.handouts.clear()
        return changed

    def cut(self, source, value, how):
        """``value`` is ``source.data`` or ``source.detach()`` (``how``); ``source`` requires grad."""
        aliases = self.aliases
        if len(aliases) >= ALIAS_LIMIT:
            for key in [k for k, e in aliases.items() if e[0]() is None] or list(aliases)[:ALIAS_LIMIT // 2]:
                del aliases[key]
        try:
            aliases[id(value)] = (weakref.ref(value), weakref.ref(source), how)
        except TypeError:
            pass

    def cut_source(self, value, base, how="data"):
        """``(source, how)`` when ``value`` (or ``base``, what it is a view of) is a cut of ``source`` made ``how``
        (``None``: either way); else None."""
        aliases = self.aliases
        for x in (value, base):
            if x is None:
                continue
            found = aliases.get(id(x))
            if found is not None and found[0]() is x and (how is None or found[2] == how):
                source = found[1]()
                return None if source is None else (source, found[2])
        return None

    def wrote(self, value, op, old, new, location):
        self.writes.append(Write(value, op, old, new, location))

    def stale_write(self, expected, current, version_of):
        """The logged write that took a saved value from version ``expected`` on, to one now at ``current``
        (``version_of(value)``: its version now, None if unreadable): the last such write, which is then
        forgotten; or None."""
        best = None
        for w in self.writes:
            value = w.ref()
            if value is not None and w.old <= expected < w.new and version_of(value) == current:
                best = w
        if best is not None:
            self.writes.remove(best)
        return best


class SummedGrads:
    """Gradients a light optimizer step used that a later backward added to with no reset in between: the next
    step uses their sum (``grad-accumulation``). A gradient is followed by identity and version: after a reset
    (``zero_grad``, ``p.grad = None``, ``p.grad.zero_()``) backward makes a new one or the reset is seen here."""

    def __init__(self):
        self._stepped = {}  # parameter key -> (weak ref to its gradient at its last step, version then, step's line)
        self._reset = set()  # parameters reset since their last step
        self._owner = {}  # id(gradient) -> parameter key, for a reset written into the gradient itself

    def reset(self, keys):
        self._reset.update(keys)

    def reset_grad(self, grad):
        key = self._owner.get(id(grad))
        if key is not None:
            self._reset.add(key)

    def step(self, grads, location):
        """A step over ``grads`` (``[(parameter key, gradient, its version)]``) at ``location``: ``[(key, the line
        of the step before)]`` for the gradients it sums across steps."""
        summed = []
        stepped, reset, owner = self._stepped, self._reset, self._owner
        for key, grad, version in grads:
            before = stepped.get(key)
            if before is not None:
                if key not in reset and before[0]() is grad and version != before[1]:
                    summed.append((key, before[2]))
                old = before[0]()
                if old is not None and old is not grad:
                    owner.pop(id(old), None)
            stepped[key] = (weakref.ref(grad), version, location)
            owner[id(grad)] = key
            reset.discard(key)
        return summed
