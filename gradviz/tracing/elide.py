"""A bounded document for one giant graph: which nodes of a graph above ``GRAPH_NODE_LIMIT`` keep full records.

The window bounds a long loop of small graphs; it cannot bound one graph of a million nodes (a chain built in a
loop with no backward until the end). Such a graph keeps in the document:

- the ``ENDS`` oldest and the ``ENDS`` newest of its op nodes (creation order is a topological order: the oldest
  are the nodes next to its leaves, the newest the ones next to its roots, where the loss is);
- its roots (the nodes nothing in the graph consumes), up to ``ENDS``;
- every point a diagnostic can start from (``points``: a NaN/Inf, a node that saved a value later overwritten,
  the node a backward raised at, a backward's root), up to ``POINT_LIMIT``, with the nodes they feed and are fed
  by;
- the gradient accumulators of the leaves those nodes read.

The rest is *elided*: counted in the graph's ``elided`` field and in ``dropped``, left out of ``nodes``,
``variables`` (their outputs) and the backward calls' ``visited`` / ``grad_norms``. Kept nodes still name elided
ones among their inputs (readers tolerate missing ids, as for dropped iterations).

While the graph lives, the tracer keeps a record per node (the engine holds every node too). Once it is dead and
counted under its structure (``prune``), the elided records are let go, so a giant graph early in a long run
does not keep its per-node records for the rest of the run.
"""

GRAPH_NODE_LIMIT = 5000  # a graph with more nodes than this is elided down to about this many
ENDS = 2000  # kept at each end of a big graph (oldest, newest), and at most this many roots
POINT_LIMIT = 100  # diagnostic points kept per graph, each with its neighbours


def points_of(trace):
    """Node ids a diagnostic may point at: first NaN/Inf, nodes flagged non-finite, savers of overwritten
    values, nodes a backward raised at or started from. Bounded by what the builder already pins."""
    found = []
    first = trace.first_nonfinite
    if first is not None:
        found.append(first["node"])
    for event in trace.events.values():
        found.extend(event.get("saved_by") or ())
        node = event.get("node")
        if node is not None:
            found.append(node)
    for b in trace.backwards.values():
        found.extend(n for n in b["root_nodes"] if n is not None)
        error = b["error"]
        if error is not None and error.get("node") is not None:
            found.append(error["node"])
    return found


def elide(graph, nodes, points, shared=(), limit=None):
    """The ids of ``graph``'s nodes left out of the document (a set; empty when the graph is small enough).
    ``shared``: accumulator ids that other graphs list (never elided: the record belongs to the leaf).
    ``limit``: the size to elide down to, lower than ``GRAPH_NODE_LIMIT`` when the document's node budget is
    shared by many graphs (tracing/document.py); the ends kept shrink with it."""
    ids = graph.nodes
    limit = GRAPH_NODE_LIMIT if limit is None else limit
    if len(ids) <= limit:
        return set()
    ends = min(ENDS, max(1, limit * 2 // 5))
    accumulators = graph.accumulators
    ops = sorted(nid for nid in ids if nid not in accumulators)
    if len(ops) + min(len(accumulators), ends) <= limit:
        return set()
    keep = set(ops[:ends])
    keep.update(ops[-ends:])
    members = set(ops)
    consumed = set()
    flagged = []
    for nid in ops:
        rec = nodes.get(nid)
        if rec is None:
            continue
        for n, _ in rec.inputs:
            consumed.add(n)
        if rec.nonfinite is not None and len(flagged) < POINT_LIMIT:
            flagged.append(nid)
    roots = [nid for nid in ops if nid not in consumed]
    keep.update(roots[:ends])
    wanted = [n for n in points if n in members][:POINT_LIMIT] + flagged
    if wanted:
        wanted_set = set(wanted)
        for nid in wanted:
            keep.add(nid)
            rec = nodes.get(nid)
            if rec is not None:
                keep.update(n for n, _ in rec.inputs if n in members)
        for nid in ops:  # the nodes a point feeds
            rec = nodes.get(nid)
            if rec is not None and any(n in wanted_set for n, _ in rec.inputs):
                keep.add(nid)
    for nid in list(keep):  # the accumulators of the leaves the kept nodes read
        rec = nodes.get(nid)
        if rec is not None:
            keep.update(n for n, _ in rec.inputs if n in accumulators)
    return {nid for nid in ids if nid not in keep and nid not in shared}


def shared_accumulators(graphs, graph):
    """Accumulator ids that graphs other than ``graph`` list."""
    found = set()
    for other in graphs:
        if other is not graph and other.parent is None:
            found |= other.accumulators
    return found


def prune(trace, graph):
    """Let go of the elided records of ``graph``, a dead giant graph already counted under its structure: what
    its document entry would leave out anyway. Backward calls through it forget those nodes too."""
    gone = elide(graph, trace.nodes, points_of(trace), shared_accumulators(trace.groups.graphs.values(), graph))
    if not gone:
        return
    nodes = trace.nodes
    consumed = set()
    for nid in graph.nodes:
        rec = nodes.get(nid)
        if rec is not None:
            consumed.update(n for n, _ in rec.inputs)
    graph.roots = [nid for nid in sorted(graph.nodes) if nid not in consumed and nid not in graph.accumulators]
    variables = trace.variables
    dropped = trace.groups.dropped
    for nid in gone:
        rec = nodes.pop(nid, None)
        if rec is None:
            continue
        for vid in rec.outputs:
            var = variables.get(vid)
            if var is not None and not (var.pinned or var.named_by_user):
                del variables[vid]
                dropped["elided_variables"] = dropped.get("elided_variables", 0) + 1
    graph.nodes = [nid for nid in graph.nodes if nid not in gone]
    graph.accumulators -= gone
    graph.elided += len(gone)
    dropped["elided_nodes"] = dropped.get("elided_nodes", 0) + len(gone)
    for b in trace.backwards.values():
        visited = b["visited"]
        if any(n in gone for n in visited):
            kept = [n for n in visited if n not in gone]
            b["elided_visits"] = b.get("elided_visits", 0) + len(visited) - len(kept)
            visited[:] = kept  # the same list: a backward in progress keeps appending to it
            norms = b["grad_norms"]
            for n in [n for n in norms if n in gone]:
                del norms[n]
