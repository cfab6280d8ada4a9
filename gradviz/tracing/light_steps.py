"""Light iterations' bookkeeping, the same for every engine (tracing/schedule.py says what light iterations are).

An adapter's light-step class derives from ``LightSteps`` and keeps only what touches its engine: how it goes
light and back (``enter``/``leave``), how it reads input shapes, roots, gradients. Here: the iteration's structure
signature, where an iteration ends (an optimizer step, or a backward in a loop without one), the graphs built on
light iterations that are still alive (weak references), and the hand-over of NaN/Inf roots and gradient norms to
the builder, with the user's line.
"""

import weakref

from .frames import location_at
from .light_watch import SummedGrads
from .loss_walk import loss_markers


class _GraphRef(weakref.ref):
    __slots__ = ("key", "nbytes")


class LightSteps:
    """``on`` while the current iteration is light; ``enabled`` when the trace has a light schedule at all.
    ``lock``: what guards the builder's facts for this adapter (the builder itself); None: the builder's bare
    ``lock``, looked up when first needed (a test's stand-in builder may have none)."""

    def __init__(self, builder, lock=None):
        self.builder = builder
        self._lock = lock
        self.enabled = False
        self.on = False
        self.calls = set()  # this iteration's (module id, input shapes)
        self.count = 0  # and how many module calls it made
        self.roots = set()  # its backward roots' node classes
        self.has_optimizer = False
        self._by_backward = False  # the first backward ended an iteration before the first step was seen
        self._last = self._last_calls = self._last_roots = None  # the last signature, and what it was made of
        self._graphs = {}  # key -> weak reference to a light graph's marker (its saved-bytes estimate on it)
        self.summed = SummedGrads()  # gradients summed across light steps (grad-accumulation)
        self.backward_location = None  # the line of the last light backward

    @property
    def lock(self):
        return self._lock if self._lock is not None else self.builder.lock

    # ----- what the engine does: going light and back ----------------------------------------------------------
    def enter(self):
        raise NotImplementedError  # each adapter removes its own per-op machinery

    def leave(self):
        raise NotImplementedError

    # ----- the signature: cheap enough for every iteration ----------------------------------------------------
    def note_call(self, module, shapes):
        """A module call on ``shapes`` (a tuple, None for a non-tensor input)."""
        self.count += 1
        self.calls.add((id(module), shapes))

    def note_root(self, node):
        """A backward root's node (any engine's object; its class name goes into the signature)."""
        if node is not None:
            self.roots.add(type(node).__name__)
            self.roots.update(loss_markers(node))  # a mistake in what feeds the loss makes a new signature

    def signature(self):
        """The iteration's structure signature: which modules ran on which input shapes, the loss's node class,
        and the number of module calls to within a factor of two (a new episode length of the same policy is
        not a new structure each time; a tenfold longer one is). The last one is reused when equal (its hash is
        then cached)."""
        last = self._last
        if last is None or self.calls != self._last_calls or self.roots != self._last_roots or \
                self.count.bit_length() != last[2]:
            last = self._last = (frozenset(self.calls), frozenset(self.roots), self.count.bit_length())
            self._last_calls, self._last_roots = self.calls, self.roots
        self.calls = set()
        self.roots = set()
        self.count = 0
        return last

    # ----- where an iteration ends --------------------------------------------------------------------------------
    def backward_ended(self):
        """A backward ended: the iteration's end while the loop has shown no optimizer (once the builder stops
        holding the first backward calls for a first step that may sum them, ``Grouping.hold``)."""
        if not self.has_optimizer and not self.builder.groups.hold:
            self._by_backward = True
            self.iteration_ended()

    def step_ended(self):
        """An optimizer step ended: the iteration's end (unless its backward ended it, before any step was seen)."""
        self.has_optimizer = True
        if self._by_backward:
            self._by_backward = False
            return
        self.iteration_ended()

    def iteration_ended(self):
        """Tell the builder an iteration ended; switch to what the next one is to be."""
        signature = self.signature()
        with self.lock:
            full = self.builder.step_ended(signature, self.on)
        if full and self.on:
            self.leave()
        elif not full and not self.on:
            self.enter()

    # ----- graphs built on light iterations ------------------------------------------------------------------------
    def watching(self, key):
        return key in self._graphs

    def watch_graph(self, marker, key, nbytes):
        """A light graph seen at its backward: ``marker`` (weak-referenceable) dies with it; ``nbytes``: the saved
        bytes it is estimated to hold."""
        ref = _GraphRef(marker, self._graph_died)
        ref.key = key
        ref.nbytes = nbytes
        self._graphs[key] = ref
        with self.lock:
            self.builder.light_graph(nbytes, True)
        return ref

    def _graph_died(self, ref):
        if self._graphs.get(ref.key) is ref:
            del self._graphs[ref.key]
        with self.lock:
            self.builder.light_graph(ref.nbytes, False)

    def graph_freed(self, key):
        """A backward without retain_graph went through the light graph ``key``: it holds no saved bytes now."""
        ref = self._graphs.get(key)
        if ref is not None and ref.nbytes:
            with self.lock:
                self.builder.light_freed(ref.nbytes)
            ref.nbytes = 0

    # ----- findings ------------------------------------------------------------------------------------------
    def nonfinite_root(self, value, frame, culprit=None, data=None):
        """A light backward's root is NaN/Inf (``value``: its float, or None); ``frame``: the user's, or None;
        ``culprit``: ``(op name, phase)`` of the node that made it, when its graph tells (``phase`` "forward": its
        output; "input": a value from outside the graph, the data); ``data``: ``(name, Location)`` of the line
        that made that value (``data_origin``), when found. The op's line is the one line of the user's file that
        calls it by name, if there is one (``source_match``)."""
        from .source_match import line_calling

        location = None if frame is None else location_at(frame.f_code, frame.f_lineno)
        op = phase = op_location = None
        if culprit is not None:
            op, phase = culprit
            if phase == "forward" and location is not None:
                op_location = line_calling(op, location.file, location.line)
        with self.lock:
            self.builder.light_loss(value, location, op=op, phase=phase, op_location=op_location, data=data)

    def grads_stepped(self, optimizer, grads, frame):
        """A light step of ``optimizer`` over ``grads`` (``[(parameter key, gradient, version)]``), called from
        ``frame`` (the user's): gradients a backward added to since their last step, with no reset, are summed
        across steps — recorded at once, with the line of the backward before it."""
        location = None if frame is None else location_at(frame.f_code, frame.f_lineno)
        summed = self.summed.step(grads, location)
        if summed:
            with self.lock:
                self.builder.light_summed(type(optimizer).__name__, location, summed, self.backward_location)

    def gradient_norms(self, norms, user_frame):
        """``norms``: [(parameter key, name or None, gradient norm)] at a light optimizer step; ``user_frame()``
        finds the user's frame, asked only when some norm is NaN/Inf."""
        total = sum([n for _, _, n in norms])
        location = None
        if total - total != 0:
            frame = user_frame()
            location = None if frame is None else location_at(frame.f_code, frame.f_lineno)
        with self.lock:
            self.builder.light_norms(norms, location)
