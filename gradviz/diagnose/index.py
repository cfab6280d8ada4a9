"""Lookups over one trace document (docs/trace-format.md), built once and shared by every rule.

Rules read only the document, never live engine objects, so they work the same on a trace just recorded and
on a ``report.json`` loaded from disk.
"""

import math


def loc_key(location):
    """Sort key of a Location (unknown locations last)."""
    if not location:
        return ("\uffff", 1 << 30)
    return (location.get("file") or "", location.get("line") or 0)


def same_line(a, b):
    return bool(a and b and a.get("file") == b.get("file") and a.get("line") == b.get("line"))


def where(location):
    """``file:line`` for messages (``?`` when unknown)."""
    if not location:
        return "?"
    return f"{location.get('file') or '?'}:{location.get('line') or '?'}"


def is_finite_number(value):
    if isinstance(value, str):
        return value.lower() not in ("nan", "inf", "-inf", "infinity", "-infinity")
    if value is None:
        return True
    return math.isfinite(value)


class DocIndex:
    """The document's lists as dictionaries plus the few derived relations the rules need."""

    def __init__(self, doc):
        self.doc = doc
        self.variables = {v["id"]: v for v in doc.get("variables") or ()}
        self.nodes = {n["id"]: n for n in doc.get("nodes") or ()}
        self.graphs = {g["id"]: g for g in doc.get("graphs") or ()}
        self.backwards = list(doc.get("backwards") or ())
        self.events = list(doc.get("events") or ())
        self.events_by_id = {e["id"]: e for e in self.events}
        self._consumers = None
        self._var_consumers = None
        self._cuts = None

    # ----- naming ---------------------------------------------------------------------------------------
    def var_label(self, var_id):
        """How a message names a Variable: its name, else ``v<id>``; with its shape."""
        v = self.variables.get(var_id)
        if v is None:
            return f"v{var_id}"
        name = v.get("name") or f"v{var_id}"
        shape = v.get("shape")
        return f"`{name}` {tuple(shape)}" if shape else f"`{name}`"

    def var_name(self, var_id):
        v = self.variables.get(var_id)
        return (v.get("name") if v else None) or f"v{var_id}"

    def node_label(self, node_id):
        n = self.nodes.get(node_id)
        return f"{n['op']} (n{node_id})" if n else f"n{node_id}"

    # ----- ordering -------------------------------------------------------------------------------------
    def events_of(self, kind):
        return [e for e in self.events if e.get("kind") == kind]

    def timeline(self):
        """Events and backward calls in the order they happened, as ``(kind, record)`` pairs (``kind`` is the
        event's kind or ``"backward"``). Uses the records' ``seq`` when the tracer provides it; otherwise a
        backward is placed before the first event of a later iteration and after those of earlier ones, and
        an event recorded at the backward's own line (``y1.backward(y1.grad)`` reads ``.grad`` first) goes
        before it."""
        items = [(e.get("kind"), e) for e in self.events] + [("backward", b) for b in self.backwards]
        if all("seq" in rec for _, rec in items):
            return sorted(items, key=lambda item: item[1]["seq"])
        return _merge_by_iteration(self.events, self.backwards)

    # ----- graph relations --------------------------------------------------------------------------------
    def consumers(self, node_id):
        """Nodes that take ``node_id``'s output as an input (the forward direction)."""
        if self._consumers is None:
            table = {}
            for n in self.nodes.values():
                for edge in n.get("inputs") or ():
                    if edge and edge[0] is not None:
                        table.setdefault(edge[0], []).append(n["id"])
            self._consumers = table
        return self._consumers.get(node_id, ())

    def var_consumers(self, var_id):
        """Nodes that were fed Variable ``var_id`` (whether or not it required grad then)."""
        if self._var_consumers is None:
            table = {}
            for n in self.nodes.values():
                for i, vid in enumerate(n.get("input_variables") or ()):
                    if vid is not None:
                        table.setdefault(vid, []).append((n["id"], i))
            self._var_consumers = table
        return self._var_consumers.get(var_id, ())

    def reachable_from(self, node_ids):
        """Every node backward could reach from ``node_ids`` (following ``inputs``), without recursion."""
        seen = set()
        stack = [n for n in node_ids if n is not None]
        while stack:
            nid = stack.pop()
            if nid in seen:
                continue
            seen.add(nid)
            node = self.nodes.get(nid)
            if node is None:
                continue
            for edge in node.get("inputs") or ():
                if edge and edge[0] is not None and edge[0] not in seen:
                    stack.append(edge[0])
        return seen

    def downstream(self, node_id):
        """Every node computed (directly or not) from ``node_id``'s outputs."""
        seen = set()
        stack = [node_id]
        while stack:
            nid = stack.pop()
            if nid in seen:
                continue
            seen.add(nid)
            stack.extend(c for c in self.consumers(nid) if c not in seen)
        return seen

    def leaf_node(self, var_id):
        """The node a leaf's gradient flows into (its AccumulateGrad), or None."""
        v = self.variables.get(var_id)
        return v.get("accumulator") if v else None

    def grad_node(self, var_id):
        """The node whose gradient is this Variable's: grad_fn for a non-leaf, AccumulateGrad for a leaf."""
        v = self.variables.get(var_id)
        if v is None:
            return None
        return v.get("node") if v.get("node") is not None else v.get("accumulator")

    # ----- cuts ---------------------------------------------------------------------------------------------
    def cuts(self):
        """``{result variable id: (source variable id, how, location)}`` for every Variable made by cutting
        another out of the graph: ``.data``, ``detach()``, a numpy round trip, or re-wrapping such a cut in a
        new Variable (``Variable(y1.data, requires_grad=True)``)."""
        if self._cuts is not None:
            return self._cuts
        cuts = {}
        detaches = self.events_of("detach")
        for e in detaches:
            if e.get("result") is not None and e.get("result") != e.get("source"):
                cuts[e["result"]] = (e.get("source"), e.get("how"), e.get("location"))
        for v in self.variables.values():
            vid = v["id"]
            if vid in cuts:
                continue
            source = v.get("source")
            origin = v.get("origin")
            if source is not None and origin in ("data", "detach", "numpy", "new"):
                how = origin if origin != "new" else self._cut_how(source)
                cuts[vid] = (self._cut_root(source, cuts), how, v.get("location"))
            elif origin in ("new", "numpy") and v.get("location"):
                # A Variable built on the line where a value left the graph re-wraps that value.
                for e in detaches:
                    if e.get("source") is not None and same_line(e.get("location"), v["location"]) \
                            and e.get("iteration") == self._iteration_of(v) and e["source"] != vid:
                        cuts[vid] = (e["source"], e.get("how"), v["location"])
                        break
        for vid, (source, how, location) in list(cuts.items()):
            cuts[vid] = (self._cut_root(source, cuts), how, location)
        self._cuts = cuts
        return cuts

    def _cut_how(self, source):
        origin = (self.variables.get(source) or {}).get("origin")
        return origin if origin in ("data", "detach", "numpy") else "data"

    def _cut_root(self, source, cuts):
        # Follow chains such as Variable(y1.data): the re-wrapped Variable's source is the `.data` cut,
        # whose own source is y1 — name y1, the Variable still in the graph.
        seen = set()
        while source in cuts and source not in seen:
            seen.add(source)
            source = cuts[source][0]
        return source

    def _iteration_of(self, v):
        graph = self.graphs.get(v.get("graph"))
        if graph is not None:
            return graph.get("iteration")
        return v.get("iteration")


def _merge_by_iteration(events, backwards):
    """Interleave backwards into events (both already in their own order) when no ``seq`` is recorded."""
    merged = []
    pending = list(backwards)
    for e in events:
        while pending and _backward_before(pending[0], e):
            merged.append(("backward", pending.pop(0)))
        merged.append((e.get("kind"), e))
    merged.extend(("backward", b) for b in pending)
    return merged


def _backward_before(backward, event):
    b_it, e_it = backward.get("iteration"), event.get("iteration")
    if b_it is not None and e_it is not None and b_it != e_it:
        return b_it < e_it
    if same_line(backward.get("location"), event.get("location")):
        return False  # the line's own reads (y1.backward(y1.grad)) run before its backward
    return False
