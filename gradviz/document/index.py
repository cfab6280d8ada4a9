"""``DocIndex``: the read model of one trace document (docs/trace-format.md), built once and shared by every
diagnostic rule and every renderer.

Readers see only the document, never live engine objects, so they work the same on a trace just recorded and
on a ``report.json`` loaded from disk. An id may name a record the tracer dropped (or a hand-edited file lost):
every lookup here tolerates it, as the format asks of consumers.
"""

import math
import os
import re
from collections import Counter
from functools import cached_property

from .schema import is_id_key
from .vocabulary import severity_rank


def loc_key(location):
    """Sort key of a Location (unknown locations last)."""
    if not location:
        return ("\uffff", 1 << 30)
    return (location.get("file") or "", location.get("line") or 0)


def same_line(a, b):
    return bool(a and b and a.get("file") == b.get("file") and a.get("line") == b.get("line"))


def _line_of(location):
    """What ``same_line`` compares, as a key."""
    return location.get("file"), location.get("line")


def where(location):
    """``file:line`` for messages (``?`` when unknown)."""
    if not location:
        return "?"
    return f"{location.get('file') or '?'}:{location.get('line') or '?'}"


def code_text(location):
    """The source line of a location without its trailing comment, for quoting in messages."""
    text = (location or {}).get("text") or ""
    if "#" in text and text.count('"') % 2 == 0 and text.count("'") % 2 == 0:
        text = text[:text.index("#")]
    return text.strip()


def is_finite_number(value):
    if isinstance(value, str):
        return value.lower() not in ("nan", "inf", "-inf", "infinity", "-infinity")
    if value is None:
        return True
    return math.isfinite(value)


class DocIndex:
    """The document's lists as dictionaries plus the derived relations the rules and the pictures need; the
    derived tables are computed on first use, so each reader pays only for what it reads."""

    def __init__(self, doc):
        self.doc = doc
        self.variables = {v["id"]: v for v in doc.get("variables") or ()}
        self.nodes = {n["id"]: n for n in doc.get("nodes") or ()}
        self.graphs = {g["id"]: g for g in doc.get("graphs") or ()}
        self.structures = {s["id"]: s for s in doc.get("structures") or ()}
        self.backwards = list(doc.get("backwards") or ())
        self.events = list(doc.get("events") or ())
        self.events_by_id = {e["id"]: e for e in self.events}
        self._reset_derived()

    def _reset_derived(self):
        self._consumers = None
        self._var_consumers = None
        self._cuts = None
        self._line_results = None
        self._home = None

    def with_graphs_of(self, doc):
        """The index of ``doc``, a copy of this index's document with other ``graphs`` (part of a graph drawn on
        its own): the records' tables are shared, not rebuilt, which is most of an index's cost on a big
        document (a page draws a view per module box and folded loop)."""
        index = object.__new__(DocIndex)
        index.__dict__.update(self.__dict__)
        index.doc = doc
        index.graphs = {g["id"]: g for g in doc.get("graphs") or ()}
        index._reset_derived()
        index._home = self._home
        return index

    @property
    def home(self):
        """The file most of the trace happened in (the script's): found on first use."""
        if self._home is None:
            self._home = _home_file(self) or ""
        return self._home or None

    def where(self, location):
        """``line N`` in the script most of the trace happened in, ``file.py:N`` elsewhere (messages stay short;
        the records' location fields keep the full path)."""
        if not location:
            return "an unknown line"
        file = location.get("file") or "?"
        if file == self.home:
            return f"line {location.get('line')}"
        return f"{os.path.basename(file)}:{location.get('line')}"

    # ----- naming ---------------------------------------------------------------------------------------
    def var_label(self, var_id):
        """How a message names a Variable: its name, else ``v<id>``; with its shape."""
        v = self.variables.get(var_id)
        if v is None:
            return f"v{var_id}"
        name = self.var_name(var_id)
        shape = v.get("shape")
        return f"`{name}` {tuple(shape)}" if shape else f"`{name}`"

    def var_name(self, var_id):
        v = self.variables.get(var_id)
        if v is None:
            return f"v{var_id}"
        return v.get("name") or self._assigned_name(v) or f"v{var_id}"

    def _assigned_name(self, v):
        """For a Variable that is the result of an assignment line (``h = model1(X)``: the last Variable the
        line made in that iteration; ``x = Variable(...)``), the assigned name."""
        match = _ASSIGNMENT.match((v.get("location") or {}).get("text") or "")
        if not match:
            return None
        if v.get("origin") in ("new", "data", "detach", "numpy"):
            return match.group(1)
        if v.get("origin") != "op":
            return None
        if self._line_results is None:
            results = {}
            for other in self.variables.values():
                loc = other.get("location") or {}
                key = (loc.get("file"), loc.get("line"), other.get("iteration"))
                results[key] = max(results.get(key, -1), other["id"])
            self._line_results = results
        loc = v["location"]
        return match.group(1) if self._line_results.get((loc.get("file"), loc.get("line"),
                                                          v.get("iteration"))) == v["id"] else None

    def variable_label(self, var_id):
        """How a picture names a Variable: the name the trace recorded, else ``v<id>``."""
        var = self.variables.get(var_id)
        return (var or {}).get("name") or f"v{var_id}"

    def node_label(self, node_id):
        n = self.nodes.get(node_id)
        return f"{n['op']} (n{node_id})" if n else f"n{node_id}"

    # ----- what the pictures mark -----------------------------------------------------------------------------
    @cached_property
    def modules(self):
        """``{module path: class name}``; documents give ``{path: class}``, ``{path: {"class": …}}`` or
        ``[{"path", "class"}]``."""
        modules = self.doc.get("modules")
        if isinstance(modules, dict):
            return {p: (c.get("class") if isinstance(c, dict) else c) for p, c in modules.items()}
        if isinstance(modules, list):
            return {m["path"]: m.get("class") for m in modules if isinstance(m, dict) and "path" in m}
        return {}

    @cached_property
    def node_norm(self):
        """``{node id: norm of the gradient it received}`` over every backward call (the last one wins)."""
        return self._norms("grad_norms")

    @cached_property
    def leaf_norm(self):
        """``{variable id: norm of the gradient accumulated into the leaf}`` over every backward call."""
        return self._norms("leaf_grad_norms")

    def _norms(self, field):
        table = {}
        for backward in self.backwards:
            for key, norm in (backward.get(field) or {}).items():
                if is_id_key(key):  # a validated document has only these; a hand-built one may not
                    table[int(key)] = norm
        return table

    @cached_property
    def visited(self):
        """Ids of every node some backward call went through."""
        return {n for b in self.backwards for n in b.get("visited") or ()}

    @cached_property
    def severity(self):
        """``{node id: the most severe diagnostic that points at it}``."""
        table = {}
        for diag in self.doc.get("diagnostics") or ():
            for node_id in self._diag_nodes(diag):
                if severity_rank(diag.get("severity")) > severity_rank(table.get(node_id)):
                    table[node_id] = diag["severity"]
        return table

    @cached_property
    def codes(self):
        """``{node id: [(severity, code)]}`` of the diagnostics that point at the node."""
        table = {}
        for diag in self.doc.get("diagnostics") or ():
            for node_id in self._diag_nodes(diag):
                table.setdefault(node_id, []).append((diag.get("severity"), diag.get("code")))
        return table

    def _diag_nodes(self, diag):
        ids = list(diag.get("nodes") or [])
        for var_id in diag.get("variables") or []:
            var = self.variables.get(var_id)
            if var is not None:
                ids += [n for n in (var.get("node"), var.get("accumulator")) if n is not None]
        return dict.fromkeys(ids)

    @cached_property
    def stale(self):
        """``{node id: [in-place events that changed a value the node saved]}``."""
        table = {}
        for event in self.events_of("inplace"):
            for node_id in event.get("saved_by") or []:
                table.setdefault(node_id, []).append(event)
        return table

    @cached_property
    def none_reads(self):
        """``{variable id: the first `.grad` read that got None}``."""
        table = {}
        for event in self.events_of("grad_read"):
            if event.get("was_none"):
                table.setdefault(event.get("variable"), event)
        return table

    # ----- ordering -------------------------------------------------------------------------------------
    def events_of(self, kind):
        return [e for e in self.events if e.get("kind") == kind]

    def timeline(self):
        """Events and backward calls in the order they happened, as ``(kind, record)`` pairs (``kind`` is the
        event's kind or ``"backward"``), by the ``seq`` number the tracer gives both. A record without one (a
        hand-made document) goes last, in document order."""
        items = [(e.get("kind"), e) for e in self.events] + [("backward", b) for b in self.backwards]
        return sorted(items, key=lambda item: item[1].get("seq", _NO_SEQ))

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

    def cuts(self):
        """``{result variable id: (source variable id, how, location)}`` for every Variable made by cutting
        another out of the graph: ``.data``, ``detach()``, a numpy round trip, or re-wrapping such a cut in a
        new Variable (``Variable(y1.data, requires_grad=True)``)."""
        if self._cuts is not None:
            return self._cuts
        cuts = {}
        detaches = self.events_of("detach")
        on_line = {}  # (file, line) -> the detach events there, in order: a long run has thousands of each
        for e in detaches:
            if e.get("result") is not None and e.get("result") != e.get("source"):
                cuts[e["result"]] = (e.get("source"), e.get("how"), e.get("location"))
            if e.get("location") and e.get("source") is not None:
                on_line.setdefault(_line_of(e["location"]), []).append(e)
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
                for e in on_line.get(_line_of(v["location"]), ()):
                    if e.get("iteration") == self._iteration_of(v) and e["source"] != vid:
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


_NO_SEQ = float("inf")
_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*=[^=]")


def _home_file(index):
    script = index.doc.get("script")
    files = Counter()
    for b in index.backwards:
        files[(b.get("location") or {}).get("file")] += 1
    for v in index.variables.values():
        files[(v.get("location") or {}).get("file")] += 1
    files.pop(None, None)
    if script and script in files:
        return script
    return files.most_common(1)[0][0] if files else None
