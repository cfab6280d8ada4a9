"""Which iterations a trace records in full, and what the light iterations in between still watch.

A full iteration costs every op's record (docs/performance.md: 2-7× on real PyTorch); a light one removes the
per-op machinery and keeps what costs O(1) or O(parameters) a step. ``Schedule`` decides, at the end of each
iteration, whether the next one is full:

- the first ``full_steps`` iterations (the kept window);
- samples after it, on a doubling schedule (8, 16, 32, ...);
- the iteration after a light one showed a structure signature never seen (a new graph shape);
- ``FIRE_STEPS`` iterations from the moment a light step found something (a NaN/Inf loss or gradient, graphs
  piling up);
- with ``trace_steps=(first, last)``: exactly those iterations, nothing else.

``LightWatch`` holds what light iterations found (engine-neutral plain data; the adapters measure it). Both are
owned by the ``TraceBuilder`` and written into the document's ``schedule`` section (docs/trace-format.md).
"""

SAMPLE_FROM = 8  # the first sampled iteration; then every power of two
NEW_STRUCTURE_LIMIT = 16  # full iterations given to new signatures, at most (the report stays bounded)
SIGNATURE_LIMIT = 4096  # signatures remembered; beyond it nothing counts as new
FIRE_STEPS = 3  # full iterations after a finding (two in a row show a chain from one iteration to the next)
GROWTH_RISES = 3  # light iterations in a row with more graphs alive than the one before: graphs pile up
PARAMETER_LIMIT = 4096  # parameters whose gradient norms are summarised


class Schedule:
    """``light=False``: every iteration full (the tracer as it always was). ``light=True``: the schedule above."""

    def __init__(self, light=False, full_steps=3, trace_steps=None):
        self.light = light
        self.full_steps = full_steps
        self.trace_steps = trace_steps
        self.full = {}  # iteration -> why it was traced in full (only when light: else every iteration is)
        self.light_count = 0
        self._signatures = set()
        self._new_structures = 0
        self._fire_until = -1
        self._fire_why = None

    def why_full(self, iteration, new_signature=False):
        """Why ``iteration`` is traced in full, or None for a light one."""
        if not self.light:
            return "full"
        if self.trace_steps is not None:
            first, last = self.trace_steps
            return "asked" if first <= iteration <= last else None
        if iteration < self.full_steps:
            return "first"
        if iteration <= self._fire_until:
            return self._fire_why
        if new_signature and self._new_structures < NEW_STRUCTURE_LIMIT:
            self._new_structures += 1
            return "new-structure"
        if iteration >= SAMPLE_FROM and iteration & (iteration - 1) == 0:
            return "sample"
        return None

    def seen(self, signature):
        """Remember ``signature`` (any hashable); True when it is new."""
        if signature is None or signature in self._signatures:
            return False
        if len(self._signatures) >= SIGNATURE_LIMIT:
            return False
        self._signatures.add(signature)
        return True

    def fire(self, iteration, why):
        """Something was found at light ``iteration``: the next ``FIRE_STEPS`` iterations are full."""
        if self.trace_steps is None and iteration + FIRE_STEPS > self._fire_until:
            self._fire_until = iteration + FIRE_STEPS
            self._fire_why = why

    def section(self):
        """The document's ``schedule`` section."""
        ranges = []
        for it in sorted(self.full):
            why = self.full[it]
            if ranges and ranges[-1]["last"] == it - 1 and ranges[-1]["why"] == why:
                ranges[-1]["last"] = it
            else:
                ranges.append({"first": it, "last": it, "why": why})
        return {"mode": "light" if self.light else "full", "full_steps": self.full_steps,
                "trace_steps": list(self.trace_steps) if self.trace_steps is not None else None,
                "full": ranges, "light_iterations": self.light_count}


class LightWatch:
    """What light iterations found. ``graphs``/``nbytes``: graphs built on light iterations still alive, and the
    saved bytes they are estimated to hold (a retaining backward's graph: the bytes a full iteration of the same
    signature saved); both are added to the memory points."""

    def __init__(self):
        self.graphs = 0
        self.nbytes = 0
        self.nonfinite_loss = None  # {"iteration", "location", "value"} of the first light NaN/Inf loss
        self.nonfinite_grad = None  # {"iteration", "location", "parameter"} of the first light NaN/Inf gradient
        self.growth = None  # {"iteration", "graphs_alive"}: where graphs began to pile up on light iterations
        self.norms = {}  # parameter key -> [name, last, min, max, iteration of the last]
        self._alive = []  # graphs alive at the last light iterations (for growth)
        self.last_full_bytes = 0  # saved bytes of the graphs of the last full iteration
        self.backward_calls = 0  # backward calls that ran light (the recorded ones are in the document's backwards)

    def loss(self, iteration, value, location, op=None, phase=None, op_location=None, data=None):
        """A light backward's root was not finite (``value``: its float, or None for a tensor root); ``op``, its
        ``phase`` and ``op_location``: what made it, when known; ``data``: ``(name, Location)`` of the line that
        made the value it came in with, when it came with the data. True the first time."""
        if self.nonfinite_loss is not None:
            return False
        self.nonfinite_loss = {"iteration": iteration, "location": location,
                               "value": None if value is None else repr(value), "op": op, "phase": phase,
                               "op_location": op_location}
        if data is not None:
            self.nonfinite_loss["data"], self.nonfinite_loss["data_location"] = data
        return True

    def grad_norms(self, iteration, norms, location):
        """``norms``: [(parameter key, name, norm)] at a light optimizer step. True when a norm is newly not
        finite."""
        table = self.norms
        fired = False
        for key, name, norm in norms:
            entry = table.get(key)
            if entry is None:
                if len(table) >= PARAMETER_LIMIT:
                    continue
                entry = table[key] = [name, norm, norm, norm, iteration]
            else:
                entry[1] = norm
                entry[4] = iteration
                if norm < entry[2]:
                    entry[2] = norm
                if norm > entry[3]:
                    entry[3] = norm
            if norm - norm != 0 and self.nonfinite_grad is None:
                self.nonfinite_grad = {"iteration": iteration, "location": location, "parameter": name}
                fired = True
        return fired

    def alive(self, iteration, graphs_alive):
        """One light iteration ended with ``graphs_alive`` graphs alive. True when they have now grown
        ``GROWTH_RISES`` times in a row (the first time only)."""
        seen = self._alive
        seen.append(graphs_alive)
        if len(seen) > GROWTH_RISES + 1:
            del seen[0]
        if self.growth is not None or len(seen) <= GROWTH_RISES:
            return False
        if all(a < b for a, b in zip(seen, seen[1:])):
            self.growth = {"iteration": iteration - GROWTH_RISES, "graphs_alive": graphs_alive}
            return True
        return False

    def section(self, loc, names):
        """``loc`` turns a Location into the document's form; ``names``: parameter key -> name now known."""
        def place(entry):
            if entry is None:
                return None
            placed = dict(entry, location=loc(entry["location"]))
            for key in ("op_location", "data_location"):
                if key in entry:
                    placed[key] = loc(entry[key])
            return placed

        grads = []
        for key, (name, last, low, high, it) in self.norms.items():
            grads.append({"parameter": names.get(key) or name, "last": _number(last), "min": _number(low),
                          "max": _number(high), "iteration": it})
        grad = place(self.nonfinite_grad)
        if grad is not None and grad.get("parameter") is None:
            grad["parameter"] = None
        return {"nonfinite_loss": place(self.nonfinite_loss), "nonfinite_grad": grad, "growth": self.growth,
                "graphs_alive": self.graphs, "retained_bytes": self.nbytes, "grad_norms": grads,
                "backward_calls": self.backward_calls}


def _number(x):
    """A float for JSON: NaN/Inf as strings (the document is strict JSON)."""
    if x - x == 0:
        return float(x)
    return repr(float(x))


def parse_steps(text):
    """``"A:B"`` -> (A, B), inclusive, for ``--trace-steps``; ValueError with a one-line reason otherwise."""
    first, sep, last = str(text).partition(":")
    if not sep:
        raise ValueError(f"expected A:B (first and last iteration, e.g. 500:502), got {text!r}")
    try:
        a, b = int(first), int(last)
    except ValueError:
        raise ValueError(f"expected two whole numbers A:B (e.g. 500:502), got {text!r}") from None
    if a < 0 or b < a:
        raise ValueError(f"expected 0 <= A <= B, got {text!r}")
    return a, b
