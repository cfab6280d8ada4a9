"""ReLU outputs whose units are zero for the whole batch (``dead-relu``), the same for every engine.

A unit whose pre-activation is negative for every example gets no gradient through its ReLU, so nothing moves
it back: once most of a layer's units are dead (a large negative bias, a learning rate that pushed them there),
the layer stays that way. The adapter measures it on full iterations only, one reduction per ReLU call (which
units are non-zero anywhere in the batch, counted), and hands each call in as numbers (``call``); kept per ReLU
line and module, with the layer that fed it. An adapter that holds counts unread (a device value, whose read
waits for the device: PyTorch's reads an iteration's together) sets ``settle``, which hands them in before the
section is written.
"""

DEAD_SHARE = 0.9  # a call with at least this share of its units zero for the whole batch is "mostly dead"
ENTRY_LIMIT = 64


class DeadUnits:
    def __init__(self):
        self.relus = {}  # (location, module path) -> entry
        self.settle = None  # the adapter's: hands in (``call``) the calls whose counts it still holds unread

    def call(self, location, path, cls, feeder, units, dead, iteration):
        """A ReLU call at ``location`` (inside module ``path`` of class ``cls``, or None) left ``dead`` of its
        ``units`` (the features of one example) zero for every example; ``feeder``: (path, class, op, location)
        of the layer that made its input, or None."""
        key = (location, path)
        entry = self.relus.get(key)
        if entry is None:
            if len(self.relus) >= ENTRY_LIMIT:
                return
            entry = self.relus[key] = {
                "location": location, "module": path, "class": cls, "feeder": feeder, "units": units,
                "calls": 0, "mostly_dead": 0, "iterations": 0, "least_dead": 1.0, "first_iteration": iteration,
                "last_iteration": None}
        share = dead / units if units else 0.0
        entry["calls"] += 1
        entry["mostly_dead"] += share >= DEAD_SHARE
        entry["least_dead"] = min(entry["least_dead"], share)
        if entry["last_iteration"] != iteration:
            entry["iterations"] += 1
            entry["last_iteration"] = iteration

    def section(self, loc):
        if self.settle is not None:
            self.settle()
        found = []
        for e in self.relus.values():
            feeder = e["feeder"]
            found.append(dict(e, location=loc(e["location"]), least_dead=round(e["least_dead"], 4),
                              feeder=None if feeder is None else {
                                  "module": feeder[0], "class": feeder[1], "op": feeder[2],
                                  "location": loc(feeder[3])}))
        return found
