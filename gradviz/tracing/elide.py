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


def elide(graph, nodes, points):
    """The ids of ``graph``'s nodes left out of the document (a set; empty when the graph is small enough)."""
    ids = graph.nodes
    if len(ids) <= GRAPH_NODE_LIMIT:
        return set()
    accumulators = graph.accumulators
    ops = sorted(nid for nid in ids if nid not in accumulators)
    if len(ops) + min(len(accumulators), ENDS) <= GRAPH_NODE_LIMIT:
        return set()
    keep = set(ops[:ENDS])
    keep.update(ops[-ENDS:])
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
    keep.update(roots[:ENDS])
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
    return {nid for nid in ids if nid not in keep}
