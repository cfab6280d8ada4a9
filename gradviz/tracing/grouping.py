"""Graphs, iterations and structures, memory accounting, and the bounded window of full records.

- A *graph* is a connected set of nodes built in one iteration before a backward ran through it. A new op joins
  the open graph(s) its inputs belong to (merging them); inputs from graphs that are closed (already
  backpropagated, or from an earlier iteration) are recorded as the graph's external inputs.
- An *iteration* ends at a boundary: the first new graph after a backward or an optimizer step, an optimizer's
  ``zero_grad`` after one of those, or a new graph started from the same line (and module) as an earlier graph of
  the same iteration (a loop without backward). That last split is provisional: when a later op (or a backward)
  takes inputs from graphs of the iterations it split off, before any backward closed them (``stack(log_probs)``
  in REINFORCE, an RNN's hidden state, a decoder's next step), they were one step and are folded back into one
  iteration. A provisional iteration is closed (classified, counted in the memory series, its records dropped
  when out of the window) once a real boundary follows, once its graphs are all dead (nothing can take inputs
  from them any more), or when ``CHAIN_LIMIT`` provisional iterations are open.
- Graphs with the same structure (ops, edges, shapes, module paths and parameter names, in creation order)
  share a *structure*, counted. Full records are kept for the first and last ``window`` iterations, for the
  first and last graph of each structure, and for anything a diagnostic points at (pinned, a few per line);
  the rest is dropped at each boundary and counted in ``dropped``.
- A run that makes a new structure every iteration (REINFORCE: one graph per episode, as long as the episode)
  would keep a graph per iteration that way. The structures' graphs kept beyond the window share a budget of
  ``STRUCTURE_NODE_LIMIT`` nodes: first sightings in order while it lasts, and always the largest graph seen
  (it evicts the most recent others); a graph left out is counted in ``dropped["structure_graphs"]``, its
  structure still counted.
"""

import hashlib
import itertools
from operator import itemgetter

from . import elide as _elide
from .records import GraphRecord, StructureRecord

PIN_LIMIT = 20  # pinned events/backwards per (kind, line): enough to explain, bounded in long loops
SERIES_LIMIT = 1024  # memory series points; beyond that the series is thinned (every other point)
TRAIL_LIMIT = 64  # remembered creation-order descriptions of graphs, each mapped to its structure key
CHAIN_LIMIT = 256  # open provisional iterations (a split at a repeated call site that may still fold back)
HOLD_BACKWARDS = 16  # backward calls a light schedule's first step may take (gradient accumulation) before the loop
# counts as one without an optimizer, each backward then ending an iteration
LIGHT_CHAIN_LIMIT = 4096  # the same under a light schedule, whose adapter ends each iteration at its optimizer step
# nodes of the structures' first/last graphs kept beyond the window (a node and its output are ~1 KiB of JSON)
STRUCTURE_NODE_LIMIT = 6000


_first = itemgetter(0)  # an edge's node id


def _digest(description):
    """A structure's key: ``(signature, digest, node count)`` of its description (``Grouping._describe``), a few
    dozen bytes whatever the graph's size. The signature (8 bytes, hex) is the document's; the 16-byte digest
    keeps two structures apart."""
    text = repr(description).encode()
    return (hashlib.blake2b(text, digest_size=8).hexdigest(), hashlib.blake2b(text, digest_size=16).digest(),
            len(description))


def _root_order(rec, nid):
    if rec is None:
        return ((), "", nid)
    return (rec.shape, rec.op, nid)


class MemoryBook:
    """Bytes held by saved tensors of live, unfreed nodes, each memory block counted once however many nodes
    hold it (a reference count per block). ``top`` is the highest ``now`` since the last series point (the
    point's own peak: an iteration's peak comes before its backward, its point after)."""

    __slots__ = ("counts", "now", "peak", "top")

    def __init__(self):
        self.counts = {}
        self.now = 0
        self.peak = 0
        self.top = 0

    def hold(self, owners):
        counts = self.counts
        for key, nbytes in owners:
            entry = counts.get(key)
            if entry is None:
                counts[key] = [1, nbytes]
                self.now += nbytes
            else:
                entry[0] += 1
        if self.now > self.top:
            self.top = self.now
            if self.now > self.peak:
                self.peak = self.now

    def release(self, owners):
        counts = self.counts
        for key, _ in owners:
            entry = counts.get(key)
            if entry is None:
                continue
            entry[0] -= 1
            if entry[0] == 0:
                del counts[key]
                self.now -= entry[1]


class Grouping:
    def __init__(self, trace):
        self.trace = trace  # the TraceBuilder: its record tables
        self.window = trace.window
        self.training = trace.training  # (whether an optimizer exists decides how backward calls are held)
        self.schedule = None  # the ``Schedule`` (IterationFacts', set by it): which iterations are full
        self.first_nonfinite = None  # the first NaN/Inf's facts (GradFacts', set by it): its iteration moves on a fold
        self.iteration = 0
        self.pending = False
        self.chain_limit = CHAIN_LIMIT
        # a light schedule's iterations end at optimizer steps once one was seen (the schedule's own iterations):
        # then neither a backward nor a graph started again at a seen line begins the next one
        self.step_bounded = False
        # under a light schedule, before the first optimizer step: how many more backward calls may pass without
        # ending an iteration (a gradient-accumulation loop's first step is one iteration, not k); their graphs
        # split provisionally and are folded into one at the first step (``first_step``); 0 when not holding
        self.hold = 0
        self.held = 0  # backward calls held so far (none: a loop with no backward yet splits as it always did)
        self.memory = MemoryBook()
        self.graphs = {}  # graph id -> GraphRecord (dropped graphs leave; merged ones stay until the document)
        self.graph_count = 0
        self.graphs_alive = 0
        self._graph_ids = itertools.count()
        self.structures = {}  # structure key (``_digest``) -> StructureRecord
        self.series = []
        self._iter_graphs = {0: []}
        # the current iteration's variable records made outside ops (the tracer appends to it); an op's outputs
        # are dropped with its graph
        self.iter_vars = []
        self._iter_vars = {0: self.iter_vars}
        self._iter_events = {0: []}
        self._iter_backwards = {0: []}
        self._starts = set()
        # provisional iterations: self.open_from .. self.iteration - 1 ended at a repeated call site and are not
        # closed yet; each one's memory point (taken when it ended) and call sites, kept until it is closed
        self.open_from = 0
        self.open_points = []
        self._open_starts = []
        self.dropped = {"iterations": 0, "graphs": 0, "nodes": 0, "variables": 0, "events": 0, "backwards": 0,
                        "series_points": 0, "structure_graphs": 0}
        # graphs kept beyond the window as a structure's first/last: graph id -> its cost (nodes), oldest first
        self._kept = {}
        self._kept_nodes = 0
        self._pin_counts = {}
        self.pinned_events = set()
        self.pinned_backwards = set()
        self.event_counts = {}  # (kind, location) -> [count, first iteration, last iteration]
        self.at_stop = None
        self.ended_point = None  # the memory point taken when the schedule saw the iteration end (schedule.py)
        self._trail_keys = {}  # graph trail (see ``trail``) -> (structure key, its live StructureRecord or None)

    # ----- placing nodes ----------------------------------------------------------------------------------
    def place(self, rec, children):
        """Put a new node into a graph: the open graph(s) of its inputs, or a new one. Returns the graph.
        (``TraceBuilder.op`` places the commonest case itself, one input node in an open graph, without calling.)"""
        opened = []
        closed = []
        fold = None
        for c in children:
            g = c.graph
            if g is None or c.variable is not None:
                continue
            g = g.find()
            if not g.backwarded and g.iteration == self.iteration:
                if g not in opened:
                    opened.append(g)
            else:
                if not g.backwarded and g.iteration >= self.open_from and (fold is None or g.iteration < fold):
                    fold = g.iteration  # an input from a provisional iteration: it was this step all along
                closed.append(c.id)
        if fold is not None:
            self.fold(fold)
            return self.place(rec, children)
        if opened:
            graph = opened[0]
            if len(opened) > 1:
                opened.sort(key=lambda g: g.id)
                graph = opened[0]
                for other in opened[1:]:
                    self._merge(graph, other)
        else:
            start = (rec.location, rec.module, self.trace.lasti)
            if self.pending:
                self.begin_iteration()
            elif start in self._starts and not self.step_bounded:
                self._split()
            self._starts.add(start)
            graph = self.new_graph()
        rec.iteration = graph.iteration
        rec.graph = graph  # _add, inline (an op node is never a leaf's accumulator)
        graph.nodes.append(rec.id)
        if graph.alive == 0:
            self.graphs_alive += 1
        graph.alive += 1
        for cid in closed:
            graph.external_inputs.append((rec.id, cid))
        for c in children:
            if c.variable is not None:  # a leaf's AccumulateGrad: listed in every graph that uses the leaf
                if c.id not in graph.accumulators:
                    graph.accumulators.add(c.id)
                    graph.nodes.append(c.id)
                    if c.graph is None:  # the first graph to use the leaf; not counted alive (see _add)
                        c.graph = graph
            elif c.graph is None:
                self.adopt_into(graph, c)
        return graph

    def new_graph(self):
        graph = GraphRecord(next(self._graph_ids), self.iteration)
        graph.thread = self.trace.thread()
        self.graphs[graph.id] = graph
        self._iter_graphs[self.iteration].append(graph)
        self.graph_count += 1
        return graph

    def _add(self, graph, rec):
        rec.graph = graph
        graph.nodes.append(rec.id)
        if rec.variable is not None:  # a leaf's accumulator lives as long as its leaf: it keeps no graph alive
            graph.accumulators.add(rec.id)
            return
        if graph.alive == 0:
            self.graphs_alive += 1
        graph.alive += 1

    def adopt_into(self, graph, rec, merge=False):
        """Nodes first seen as inputs (a leaf's AccumulateGrad, nodes built before the trace) join ``graph``;
        with ``merge`` (a snapshot), graphs met on the way are merged into it."""
        nodes = self.trace.nodes
        pending = [rec]
        while pending:
            r = pending.pop()
            if r.graph is not None:
                other = r.graph.find()
                if merge and other is not graph.find() and r.variable is None:
                    self._merge(graph.find(), other)
                elif r.variable is not None and r.id not in graph.accumulators:
                    graph.accumulators.add(r.id)
                    graph.nodes.append(r.id)
                continue
            self._add(graph, r)
            if r.owners:
                self.charge(graph, r.owners)
            pending.extend(c for c in (nodes.get(n) for n, _ in r.inputs if n is not None) if c is not None)

    def _merge(self, graph, other):
        other.parent = graph
        nodes = self.trace.nodes
        for nid in other.nodes:
            rec = nodes.get(nid)
            if rec is not None and rec.graph is other:
                rec.graph = graph
            if nid not in graph.accumulators:
                graph.nodes.append(nid)
        graph.accumulators |= other.accumulators
        if other.alive and graph.alive:
            self.graphs_alive -= 1
        graph.alive += other.alive
        graph.output_bytes += other.output_bytes
        for key, nbytes in (other.owner_keys or {}).items():
            self._charge_key(graph, key, nbytes)
        graph.external_inputs.extend(other.external_inputs)
        graph.pinned = graph.pinned or other.pinned
        self.graphs.pop(other.id, None)
        self.graph_count -= 1

    def charge(self, graph, owners):
        while graph.parent is not None:
            graph = graph.parent
        keys = graph.owner_keys
        if keys is None:
            keys = graph.owner_keys = {}
        for key, nbytes in owners:
            if key not in keys:
                keys[key] = nbytes
                graph.saved_bytes += nbytes

    @staticmethod
    def _charge_key(graph, key, nbytes):
        if graph.owner_keys is None:
            graph.owner_keys = {}
        if key not in graph.owner_keys:
            graph.owner_keys[key] = nbytes
            graph.saved_bytes += nbytes

    # ----- iterations ---------------------------------------------------------------------------------------
    def boundary(self):
        self.pending = True

    def zero_grad(self):
        if self.pending:
            self.begin_iteration()

    def use_schedule(self, schedule):
        """Iterations on ``schedule``: a light one chains longer graphs (a REINFORCE episode of 500 steps is one
        iteration: its splits may all fold back), and holds the first backward calls when iteration 0 is full,
        as every iteration of --full is (it sees the resets that end it: a gradient-accumulation loop's first step
        is one iteration, in both modes)."""
        self.schedule = schedule
        if schedule.light:
            self.chain_limit = LIGHT_CHAIN_LIMIT
        if not schedule.light or 0 in schedule.full:
            self.hold = HOLD_BACKWARDS

    def backward_done(self, backward):
        if self.hold and not self.training.optimizers:  # no optimizer to accumulate for: a loop that updates by
            self.hold = 0  # hand, or none, ends an iteration at each backward (as before holding)
        nodes = self.trace.nodes
        graphs = {}
        last = None  # the graph of the node visited before: consecutive nodes are mostly in one graph
        for nid in backward["visited"]:
            rec = nodes.get(nid)
            if rec is not None:
                g = rec.graph
                if g is not last and g is not None and rec.variable is None:
                    last = g
                    while g.parent is not None:
                        g = g.parent
                    graphs[g.id] = g
        fold = None
        open_from = self.open_from
        for g in graphs.values():
            if not g.backwarded and g.iteration >= open_from and (fold is None or g.iteration < fold):
                fold = g.iteration
        if fold is not None and fold < self.iteration:  # one backward through graphs of provisional iterations
            self.fold(fold)
        for g in graphs.values():
            g.backwarded = True
        backward["graphs"] = sorted(graphs)
        if self.step_bounded:
            return
        if self.hold:
            self.hold -= 1
            self.held += 1
            if self.hold:
                return  # no boundary yet: the next forward at a seen line splits provisionally
            self._confirm(self.iteration)  # so many backward calls and no step: a loop without an optimizer
        self.pending = True

    def release(self):
        """A ``zero_grad`` after held backward calls and before any step: they summed nothing across each other
        (a loop that updates by hand): each ended an iteration, as a loop without an optimizer counts."""
        self.hold = 0
        self._confirm(self.iteration)
        self.pending = True

    def first_step(self):
        """The first optimizer step of a light schedule: the backward calls held since the start were this one
        step's (gradient accumulation): their provisional iterations fold into one."""
        self.hold = 0
        if self.open_from < self.iteration:
            self.fold(self.open_from)

    def begin_iteration(self):
        """A real boundary (after a backward or an optimizer step): every provisional iteration stands."""
        self._confirm(self.iteration)
        point, self.ended_point = self.ended_point, None
        self._close(self.iteration, point if point is not None and point["iteration"] == self.iteration else None)
        self._next()
        self.open_from = self.iteration
        self._drop(self.iteration - self.window)

    def _next(self):
        self.iteration += 1
        self.pending = False
        self._starts = set()
        it = self.iteration
        self._iter_graphs[it] = []
        self._iter_vars[it] = self.iter_vars = []
        self._iter_events[it] = []
        self._iter_backwards[it] = []

    def _split(self):
        """A new graph started at a call site this iteration already started one at: a provisional boundary,
        closed later (see the module's docstring) or folded back by ``fold``."""
        self.open_points.append(self.point(self.iteration))
        self._open_starts.append(self._starts)
        self._next()
        first = self.open_from
        while first < self.iteration and (self.iteration - first > self.chain_limit or
                                          (not (self.hold and self.held) and self._dead(first))):
            first += 1
        if first > self.open_from:
            self._confirm(first)

    def _dead(self, iteration):
        return all(g.alive == 0 for g in self._iter_graphs.get(iteration, ()) if g.parent is None)

    def _confirm(self, upto):
        """Close the provisional iterations before ``upto``: they were iterations of their own."""
        for it in range(self.open_from, upto):
            self._close(it, self.open_points.pop(0))
            self._open_starts.pop(0)
            self._drop(it + 1 - self.window)
        self.open_from = max(self.open_from, upto)

    def fold(self, target):
        """The provisional iterations after ``target`` were part of it: move their records back into it."""
        nodes = self.trace.nodes
        variables = self.trace.variables
        graphs = self._iter_graphs[target]
        for it in range(target + 1, self.iteration + 1):
            for g in self._iter_graphs.pop(it):
                g.iteration = target
                if g.freed_at_iteration is not None and g.freed_at_iteration > target:
                    g.freed_at_iteration = target
                for nid in g.nodes:
                    rec = nodes.get(nid)
                    if rec is None or rec.iteration <= target:
                        continue
                    rec.iteration = target
                    for vid in rec.outputs:
                        var = variables.get(vid)
                        if var is not None and var.iteration > target:
                            var.iteration = target
                graphs.append(g)
            for var in self._iter_vars.pop(it):
                var.iteration = target
                self._iter_vars[target].append(var)
            for e in self._iter_events.pop(it):
                e["iteration"] = target
                self._iter_events[target].append(e)
            for b in self._iter_backwards.pop(it):
                b["iteration"] = target
                self._iter_backwards[target].append(b)
        for entry in self.event_counts.values():
            entry[1] = min(entry[1], target)
            entry[2] = min(entry[2], target)
        first = self.first_nonfinite
        if first is not None and first["iteration"] > target:
            first["iteration"] = target
        k = target - self.open_from
        for starts in self._open_starts[k:]:
            self._starts |= starts
        del self._open_starts[k:]
        for point in self.open_points[k:]:  # folded back: their peaks belong to the iteration that goes on
            self.memory.top = max(self.memory.top, point.get("peak_retained_bytes", 0))
        del self.open_points[k:]
        self.iteration = target
        self.iter_vars = self._iter_vars[target]

    def _close(self, iteration, point=None):
        for g in self._iter_graphs.get(iteration, ()):
            if g.parent is None and g.structure is None:
                self._classify(g)
                if g.alive == 0 and len(g.nodes) > _elide.GRAPH_NODE_LIMIT:
                    _elide.prune(self.trace, g)  # a dead giant graph: let go of the records its document elides
        self._add_point(self.point(iteration) if point is None else point)

    def point(self, iteration, closing=True):
        """The series point of ``iteration`` as it ends (``closing``: the next point's peak starts from now);
        graphs built on light iterations and still alive (schedule.py) count too."""
        memory = self.memory
        light = self.trace.light
        now = memory.now + light.nbytes
        point = {"iteration": iteration, "retained_bytes": now, "graphs_alive": self.graphs_alive + light.graphs,
                 "nodes_alive": len(self.trace.live_nodes), "peak_retained_bytes": max(memory.top + light.nbytes, now)}
        if closing:
            memory.top = memory.now
        return point

    def iteration_graphs(self, iteration):
        return self._iter_graphs.get(iteration, ())

    def _add_point(self, point):
        self.series.append(point)
        if len(self.series) > SERIES_LIMIT:  # thin: keep every other point, always the first
            self.dropped["series_points"] += len(self.series) // 2
            series = self.series
            # a dropped point's peak moves to the next kept one (or to the next point to come); a light iteration's
            # point has none (not measured): the kept point stays unmeasured unless the dropped one was measured
            for i in range(1, len(series), 2):
                peak = series[i].get("peak_retained_bytes")
                if peak is None:
                    continue
                if i + 1 < len(series):
                    kept = series[i + 1]
                    kept["peak_retained_bytes"] = max(kept.get("peak_retained_bytes", peak), peak)
                    kept.pop("measured", None)
                else:
                    self.memory.top = max(self.memory.top, peak)
            self.series = series[::2]

    # ----- structures ------------------------------------------------------------------------------------------
    def trail(self, graph):
        """A cheap description of ``graph`` in creation order: each node's op, shape, innermost module path and
        inputs (by position in the graph; a leaf's accumulator by its leaf's id, shape and name). Graphs with
        equal trails are the same graph up to renumbering, so they have equal structure keys: a training loop
        repeating one graph pays for this single pass instead of the canonical walk."""
        nodes = self.trace.nodes
        variables = self.trace.variables
        accumulators = graph.accumulators
        position = {}
        parts = []
        for nid in graph.nodes:
            if nid in accumulators:
                continue
            rec = nodes.get(nid)
            if rec is None:
                return None
            position[nid] = len(position)
            ins = []
            for n, nr in rec.inputs:
                if n is None:
                    ins.append(None)
                    continue
                p = position.get(n)
                if p is None:
                    if n not in accumulators:
                        return None  # an input made after its consumer (an in-place rewrite): the canonical walk
                    acc = nodes.get(n)
                    if acc is None:
                        return None
                    var = variables.get(acc.variable)
                    p = position[n] = ("leaf", acc.variable, acc.shape,
                                       var.name if var is not None and var.is_parameter else None)
                ins.append((p, nr))
            module = rec.module
            parts.append((rec.op, rec.shape, module[-1] if module else None, tuple(ins)))
        return tuple(parts)

    def structure_key(self, graph):
        """What makes two graphs the same, whatever order their nodes happened to be created in.

        The op nodes are numbered by a depth-first walk from the roots (the graph's outputs, taken in the order
        of their own shapes and ops), following each node's inputs in edge order; each node then contributes its
        op, output shape, innermost module path and inputs: the walk number of an input node, or for a leaf's
        AccumulateGrad (which consecutive graphs may share, so it has no walk number of its own) the order in
        which the walk first met that leaf, its shape and its parameter name.

        The description is as long as the graph; a run with a new structure every iteration (REINFORCE) would
        keep one per structure, so the key is its digest: ``(signature, 16-byte digest, node count)``."""
        nodes = self.trace.nodes
        accumulators = graph.accumulators
        records = {}
        consumed = set()
        update = consumed.update
        for nid in graph.nodes:
            if nid in accumulators:
                continue
            rec = nodes.get(nid)
            records[nid] = rec
            if rec is not None:
                update(map(_first, rec.inputs))
        roots = [nid for nid in records if nid not in consumed]
        if len(roots) > 1:
            roots.sort(key=lambda nid: _root_order(records[nid], nid))
        order = {}
        stack = roots[::-1]
        push = stack.append
        count = 0
        while stack:
            nid = stack.pop()
            if nid in order:
                continue
            order[nid] = count
            count += 1
            rec = records[nid]
            if rec is not None:
                for n, _ in reversed(rec.inputs):
                    if n in records and n not in order:
                        push(n)
        if len(order) < len(records):  # unreachable from a root only when records are missing
            for nid in sorted(records):
                if nid not in order:
                    order[nid] = len(order)
        return _digest(self._describe(order, nodes))

    def _describe(self, order, nodes):
        variables = self.trace.variables
        leaves = {}
        parts = []
        for nid in order:  # dicts keep insertion order: the walk's order
            rec = nodes.get(nid)
            if rec is None:
                parts.append(None)
                continue
            ins = []
            for n, nr in rec.inputs:
                if n is None:
                    ins.append(None)
                    continue
                p = order.get(n)
                if p is not None:
                    ins.append((p, nr))
                else:
                    child = nodes.get(n)
                    if child is not None and child.variable is not None:
                        leaf = leaves.get(n)
                        if leaf is None:
                            var = variables.get(child.variable)
                            name = var.name if var is not None and var.is_parameter else None
                            leaf = leaves[n] = ("leaf", len(leaves), child.shape, name)
                        ins.append(leaf)
                    else:
                        ins.append(("outside", nr))
            module = rec.module
            parts.append((rec.op, rec.shape, module[-1] if module else None, tuple(ins)))
        return tuple(parts)

    def _classify(self, graph, structures=None, final=False):
        """Count ``graph`` under its structure. With ``structures`` given (a copy, for a document made before
        the iteration ended) nothing in the trace itself changes. ``final`` (with ``structures``: the trace has
        stopped) when no later classification could use its trail: then the trail is made only if a remembered
        one could match it (one of as many nodes), and not remembered."""
        live = structures is None
        structures = self.structures if live else structures
        trail = None
        if not final:
            trail = self.trail(graph)
        else:
            size = len(graph.nodes) - len(graph.accumulators)  # the trail's length, unless records are missing
            if any(len(known) == size for known in self._trail_keys):
                trail = self.trail(graph)
        known = self._trail_keys.get(trail) if trail is not None else None
        if known is None:
            key = self.structure_key(graph)
            s = structures.get(key)
        else:
            key, s = known
            if not live or s is None:
                s = structures.get(key)
        if s is None:
            s = StructureRecord(len(structures), key[0], graph, key[2])
            structures[key] = s
        elif s.last_graph != graph.id:
            previous = s.last_graph
            s.last_graph = graph.id
            s.last_iteration = graph.iteration
            if live:
                self._maybe_drop_superseded(previous, s)
        s.count += 1
        if live:
            graph.structure = s
        if trail is not None and not final and (known is None or (live and known[1] is not s)):
            if len(self._trail_keys) >= TRAIL_LIMIT:
                self._trail_keys.clear()
            # a repeated graph then costs one hash of its trail (a structure key is a digest of a description
            # as long as the graph: making it again costs more than the trail)
            self._trail_keys[trail] = (key, s if live else None)
        return s

    def _maybe_drop_superseded(self, gid, structure):
        g = self.graphs.get(gid)
        if g is None or g.pinned or gid == structure.first_graph or g.iteration in self.schedule.full:
            return
        if self.window <= g.iteration <= self.iteration - self.window:
            self._drop_graph(g)

    # ----- dropping ---------------------------------------------------------------------------------------------
    def _drop(self, iteration):
        if iteration < self.window:
            return
        schedule = self.schedule
        if schedule.light:  # a full iteration of the schedule stays; a light one has no records to drop
            if iteration in schedule.full:
                return
            for table in (self._iter_graphs, self._iter_vars, self._iter_events, self._iter_backwards):
                table.pop(iteration, None)
            return
        trace = self.trace
        dropped = self.dropped
        for g in self._iter_graphs.pop(iteration, ()):
            if g.parent is not None or g.pinned:
                continue
            s = g.structure
            if s is not None and (g.id == s.first_graph or g.id == s.last_graph) and self._keep_for_structure(g):
                continue
            self._drop_graph(g)
        variables = trace.variables
        gone = 0
        for rec in self._iter_vars.pop(iteration, ()):
            if rec.pinned or rec.is_parameter or rec.graph is not None:
                continue
            if variables.pop(rec.id, None) is not None:
                gone += 1
        dropped["variables"] += gone
        events = trace.events
        pinned = self.pinned_events
        gone = 0
        for e in self._iter_events.pop(iteration, ()):
            eid = e["id"]
            if eid not in pinned and events.pop(eid, None) is not None:
                gone += 1
        dropped["events"] += gone
        backwards = trace.backwards
        pinned = self.pinned_backwards
        for b in self._iter_backwards.pop(iteration, ()):
            if b["id"] not in pinned and backwards.pop(b["id"], None) is not None:
                dropped["backwards"] += 1
        dropped["iterations"] += 1

    def _keep_for_structure(self, graph):
        """Whether ``graph``, leaving the window as a structure's first or last graph, fits the budget of
        ``STRUCTURE_NODE_LIMIT`` nodes; the largest graph seen so far always does, the most recent kept ones
        making room for it. A graph refused is counted in ``dropped["structure_graphs"]``."""
        cost = min(len(graph.nodes), _elide.GRAPH_NODE_LIMIT)  # a giant graph's document keeps about that many
        kept = self._kept
        if self._kept_nodes + cost > STRUCTURE_NODE_LIMIT:
            if any(size >= cost for size in kept.values()):
                self.dropped["structure_graphs"] += 1
                return False
            for gid in reversed(list(kept)):  # the largest yet: the most recent others make room
                if self._kept_nodes + cost <= STRUCTURE_NODE_LIMIT:
                    break
                other = self.graphs.get(gid)
                if other is None or other.pinned:
                    continue
                self.dropped["structure_graphs"] += 1
                self._drop_graph(other)
        kept[graph.id] = cost
        self._kept_nodes += cost
        return True

    def _drop_graph(self, graph):
        cost = self._kept.pop(graph.id, None)
        if cost is not None:
            self._kept_nodes -= cost
        nodes = self.trace.nodes
        variables = self.trace.variables
        dropped_nodes = dropped_vars = 0
        for nid in graph.nodes:
            rec = nodes.get(nid)
            if rec is None or rec.graph is not graph:
                continue
            del nodes[nid]
            dropped_nodes += 1
            for vid in rec.outputs:
                if variables.pop(vid, None) is not None:
                    dropped_vars += 1
        dropped = self.dropped
        dropped["variables"] += dropped_vars
        dropped["nodes"] += dropped_nodes
        dropped["graphs"] += 1
        graph.full = False
        graph.nodes = []
        graph.accumulators = set()
        graph.owner_keys = None
        self.graphs.pop(graph.id, None)

    # ----- pinning ----------------------------------------------------------------------------------------------
    def _pin_allowed(self, kind, location):
        key = (kind, location)
        count = self._pin_counts.get(key, 0)
        if count >= PIN_LIMIT:
            return False
        self._pin_counts[key] = count + 1
        return True

    def pin_event(self, event):
        if self._pin_allowed(event["kind"], event["location"]):
            self.pinned_events.add(event["id"])
            var = self.trace.variables.get(event.get("variable"))
            if var is not None:
                var.pinned = True
                if var.graph is not None:
                    var.graph.find().pinned = True

    def pin_backward(self, backward):
        if self._pin_allowed("backward", backward["location"]):
            self.pinned_backwards.add(backward["id"])
            for nid in backward["root_nodes"]:
                self.pin_node(self.trace.nodes.get(nid))

    def pin_node(self, rec):
        if rec is not None and rec.graph is not None:
            rec.graph.find().pinned = True

    # ----- bookkeeping ---------------------------------------------------------------------------------------------
    def note_event(self, event):
        self._iter_events[self.iteration].append(event)
        key = (event["kind"], event["location"])
        entry = self.event_counts.get(key)
        if entry is None:
            self.event_counts[key] = [1, self.iteration, self.iteration]
        else:
            entry[0] += 1
            entry[2] = self.iteration

    def note_backward(self, backward):
        self._iter_backwards[self.iteration].append(backward)

    def freeze(self):
        """At stop: what is alive and held now is what the document reports as final."""
        for g in self.graphs.values():
            g.alive_at_stop = g.alive > 0
        self.at_stop = self.point(self.iteration)
