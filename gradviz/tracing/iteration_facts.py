"""``IterationFacts``: the schedule of full and light iterations, and what light iterations report.

A ``TraceBuilder`` collaborator (builder.py), owner of the ``Schedule`` (which iterations are recorded in full,
tracing/schedule.py) and the ``LightWatch`` (what the light ones found). Iteration boundaries themselves are
``Grouping``'s (grouping.py): an optimizer step ends an iteration there; ``step_ended`` is how an adapter that
watches light iterations says so when no op was recorded.
"""

from .schedule import LightWatch, Schedule


class IterationFacts:
    """Full and light iterations (see ``step_ended``)."""

    def __init__(self, trace):
        self.trace = trace
        self.groups = trace.groups
        self.schedule = Schedule()  # which iterations are full (every one, unless ``use_schedule`` says light)
        self.groups.schedule = self.schedule
        self.light = LightWatch()  # what light iterations found

    def use_schedule(self, schedule):
        """Trace on ``schedule`` (a ``Schedule``), before any fact; ``starts_full()`` says how iteration 0 runs."""
        self.schedule = schedule
        if schedule.light and schedule.why_full(0):
            schedule.full[0] = schedule.why_full(0)
        self.groups.use_schedule(schedule)

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

    def light_summed(self, optimizer, location, summed, backward_location):
        """A light optimizer step (class name ``optimizer``, at ``location``) summed gradients across steps:
        ``summed`` is ``[(parameter key, the line of the step before)]`` (reported first), ``backward_location``
        the line of the last backward before it. Recorded as the step event a full iteration records, with its
        ``summed_grads`` (no backward or step record stands behind them: their ids are null)."""
        g = self.groups
        if g.pending:
            g.begin_iteration()
        live = self.trace.live_variables
        by_step = {}
        for key, previous in summed:
            by_step.setdefault(previous, []).append(live[key].id)
        record = self.trace.record_event("optimizer", location, event="step", optimizer=optimizer,
                             parameters=[p for ids in by_step.values() for p in ids])
        record["summed_grads"] = [{"parameters": ids, "backward": None, "backward_location": backward_location,
                                   "previous_step": None, "previous_step_location": previous,
                                   "previous_optimizer": optimizer} for previous, ids in by_step.items()]
        g.pin_event(record)
        self.schedule.fire(g.iteration, "finding")

    def release_hold(self):
        """Gradients reset between the backward calls held for a first step (``zero_grad``, ``p.grad = None``,
        ``p.grad.zero_()``): nothing is accumulated across them (a loop that updates by hand), so each ended an
        iteration, as a loop without an optimizer counts (``Grouping.release``)."""
        groups = self.groups
        if not (groups.hold and groups.held):
            return
        groups.release()
        why = self.schedule.why_full(groups.iteration + 1)  # (what step_ended said of the next one)
        if why is not None:
            self.schedule.full[groups.iteration + 1] = why

    def light_event(self):
        """A light iteration's watch records a fact that is no finding (a hook registered): it belongs to this
        iteration, which the next op would have opened."""
        if self.groups.pending:
            self.groups.begin_iteration()

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

