"""Gradients one optimizer's loss leaves in another optimizer's parameters, applied by that optimizer's step
(tracing/training_facts.py, ``grad_leaks``): a GAN whose discriminator loss reads the generator's output without
``detach()``, with the generator's ``zero_grad()`` before that backward instead of before its own.

Only the order of steps and ``zero_grad`` calls and the parameters' ``.grad`` are read, on full and light
iterations alike, and only while two optimizers or more are alive:

- at a step of optimizer A that follows a backward, each other optimizer B whose last ``zero_grad`` came after its
  own last step and before that backward, and whose parameters now hold a gradient (not None, not all zero), is
  marked with those gradients (the tensors themselves, weakly: accumulation writes into them);
- at B's next step, the mark is a finding when another backward ran after A's step (B's own loss: with none, one
  loss trained both optimizers' parameters, as intended) and B's parameters still hold the marked gradients.
  A ``zero_grad`` of B in between removes the mark.
"""

import weakref


class LeakWatch:
    """``facts``: the ``TrainingFacts``; ``location()``: the user's line now; ``iteration()``."""

    def __init__(self, facts, location, iteration):
        self.facts = facts
        self.location = location
        self.iteration = iteration
        # optimizer key -> weak reference to the optimizer, dropped when it dies: its size says ``watching``
        self.live = {}
        self._reset = {}  # optimizer key -> order of its last zero_grad
        self._stepped = {}  # optimizer key -> order of its last step
        self._marks = {}  # optimizer key -> (giver class, giver step location, order, [weak refs to gradients])

    @property
    def watching(self):
        """Two optimizers or more alive: a leak needs a giver and a taker (most loops have one: nothing to do)."""
        return len(self.live) > 1

    def built(self, optimizer):
        live, key = self.live, id(optimizer)
        live[key] = weakref.ref(optimizer, lambda ref: live.pop(key, None) if live.get(key) is ref else None)

    def _optimizers(self):
        """(key, optimizer) of each live optimizer."""
        return [(key, o) for key, o in ((key, ref()) for key, ref in list(self.live.items())) if o is not None]

    def zero_grad(self, owner):
        """An optimizer's ``zero_grad``, or a module's (the optimizers holding its parameters)."""
        if not self.watching:
            return
        order = self.facts.order
        if hasattr(owner, "param_groups"):
            keys = [id(owner)]
        else:
            mine = {id(p) for p in owner.parameters()}
            keys = [k for k, o in self._optimizers() if any(id(p) in mine for p in _params(o))]
        for key in keys:
            self._reset[key] = order
            self._marks.pop(key, None)

    def step(self, optimizer):
        if not self.watching:
            return
        facts, key = self.facts, id(optimizer)
        backward = facts.backward_order
        mark = self._marks.pop(key, None)
        if mark is not None and backward > mark[2]:
            held = {id(g) for g in (_grad(p) for p in _params(optimizer)) if g is not None}
            kept = sum(1 for r in mark[3] if id(r()) in held)
            if kept:
                facts.grad_leak(type(optimizer).__name__, self.location(), mark[0], mark[1], kept, self.iteration(),
                                built=(_built_at(facts, optimizer), mark[4]))
        if backward <= self._stepped.get(key, 0):
            self._stepped[key] = facts.order
            return  # no backward since this optimizer's last step: nothing of its loss to leave elsewhere
        here = None
        for other_key, other in self._optimizers():
            reset = self._reset.get(other_key)
            if other_key == key or reset is None or reset < self._stepped.get(other_key, 0) or reset > backward:
                continue
            written = [g for g in (_grad(p) for p in _params(other)) if g is not None]
            if written and any(bool(g.any()) for g in written):
                if here is None:
                    here = self.location()
                self._marks[other_key] = (type(optimizer).__name__, here, facts.order,
                                          [weakref.ref(g) for g in written], _built_at(facts, optimizer))
        self._stepped[key] = facts.order


def _built_at(facts, optimizer):
    """The line that built ``optimizer`` (its construction record), or None."""
    return next((o["location"] for o in reversed(facts.optimizers) if o["ref"]() is optimizer), None)


def _params(optimizer):
    for group in getattr(optimizer, "param_groups", ()):
        yield from group.get("params", ())


def _grad(parameter):
    return getattr(parameter, "grad", None)
