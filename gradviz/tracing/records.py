"""The tracer's records: what it remembers about each Variable, graph node, graph and structure.

Records are plain data (ints, strings, tuples, ``Location``s): the builder never holds an engine object, and
learns that one died from its adapter. ``handle`` is the adapter's own slot (gradviz's engine adapter keeps its
weak reference to the object there); the builder never looks at it.
"""

import math


class VarRecord:
    # made with ``VarRecord.__new__(VarRecord)`` and filled field by field (a Python __init__ costs a frame each)
    __slots__ = ("id", "key", "name", "shape", "dtype", "nbytes", "requires_grad", "is_leaf", "is_parameter",
                 "origin", "node", "accumulator", "source", "volatile", "grad_mode", "module", "location",
                 "graph", "iteration", "op", "inputs", "pinned", "requires_grad_final", "named_by_user", "alive",
                 "device", "handle")


class NodeRecord:
    __slots__ = ("id", "key", "op", "class_name", "custom", "inputs", "input_variables", "outputs", "variable",
                 "shape", "dtype", "saved", "meta", "module", "location", "graph", "freed_by",
                 "nonfinite", "owners", "counters", "storages", "iteration", "external", "alive", "freed", "handle")


class GraphRecord:
    """Nodes built between backward calls, connected through their edges (union-find: ``parent``)."""

    __slots__ = ("id", "iteration", "nodes", "accumulators", "parent", "backwarded", "alive", "saved_bytes",
                 "output_bytes", "owner_keys", "freed_by", "freed_at_iteration", "structure", "full", "pinned",
                 "external_inputs", "alive_at_stop", "thread", "elided", "roots")

    def __init__(self, gid, iteration):
        self.id = gid
        self.iteration = iteration
        self.nodes = []
        self.accumulators = set()
        self.parent = None
        self.backwarded = False
        self.alive = 0
        self.saved_bytes = 0
        self.output_bytes = 0
        self.owner_keys = {}
        self.freed_by = None
        self.freed_at_iteration = None
        self.structure = None
        self.full = True
        self.pinned = False
        self.external_inputs = []
        self.alive_at_stop = None
        self.thread = None  # {"name", "ident"} of the thread whose op started it
        self.elided = 0  # nodes whose records were let go once the giant graph died (tracing/elide.py)
        self.roots = None  # its roots, remembered then (they cannot be found again from the kept records)

    def find(self):
        g = self
        while g.parent is not None:
            g = g.parent
        return g


class StructureRecord:
    __slots__ = ("id", "signature", "count", "first_graph", "last_graph", "first_iteration", "last_iteration",
                 "node_count")

    def __init__(self, sid, signature, graph, node_count):
        self.id = sid
        self.signature = signature
        self.count = 0
        self.first_graph = graph.id
        self.last_graph = graph.id
        self.first_iteration = graph.iteration
        self.last_iteration = graph.iteration
        self.node_count = node_count

    def copy(self):
        other = StructureRecord.__new__(StructureRecord)
        for name in self.__slots__:
            setattr(other, name, getattr(self, name))
        return other


def json_float(value):
    """JSON has no NaN/Inf: write them as the strings ``"nan"``, ``"inf"``, ``"-inf"``."""
    if math.isfinite(value):
        return value
    return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")


def safe_message(exc):
    """The first line of ``str(exc)``, for a document: an exception whose ``__str__`` raises (or returns a
    non-string) is described as such (Python's own traceback printer says the same), never re-raised."""
    try:
        text = str(exc)
    except Exception:
        return "<exception str() failed>"
    if not isinstance(text, str):
        return "<exception str() failed>"
    return text.split("\n")[0]
