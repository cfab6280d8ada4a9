"""The tracer's records: what it remembers about each Variable, graph node, graph and structure.

A ``VarRecord``/``NodeRecord`` *is* a weak reference to the object it describes (one allocation, no strong
reference): calling it returns the object while it lives, None after. Everything else in a record is plain data
(ints, strings, tuples), so tracing never keeps an array, a Variable or a node alive.
"""

import math
import weakref
from math import isfinite, sqrt

import numpy as np


class VarRecord(weakref.ref):
    # ``VarRecord(variable, callback)``: weakref.ref's own constructor (a Python __init__ would cost a frame each)
    __slots__ = ("id", "key", "name", "shape", "dtype", "nbytes", "requires_grad", "is_leaf", "is_parameter",
                 "origin", "node", "accumulator", "source", "volatile", "grad_mode", "module", "location",
                 "graph", "iteration", "op", "inputs", "pinned", "requires_grad_final")


class NodeRecord(weakref.ref):
    __slots__ = ("id", "key", "op", "class_name", "custom", "inputs", "input_variables", "outputs", "variable",
                 "shape", "dtype", "saved", "meta", "module", "location", "graph", "freed_by", "nonfinite",
                 "owners", "counters", "iteration", "external", "alive")


class GraphRecord:
    """Nodes built between backward calls, connected through their edges (union-find: ``parent``)."""

    __slots__ = ("id", "iteration", "nodes", "accumulators", "parent", "backwarded", "alive", "saved_bytes",
                 "output_bytes", "owner_keys", "freed_by", "freed_at_iteration", "structure", "full", "pinned",
                 "external_inputs", "alive_at_stop")

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


_dtype_names = {}


def dtype_name(dtype):
    """``dtype.name`` is computed in Python by numpy on every access: cache it."""
    name = _dtype_names.get(dtype)
    if name is None:
        name = _dtype_names[dtype] = dtype.name
    return name


def _square_sum(a):
    """Sum of squares with one BLAS dot over the array's memory order (no copy for transposed views)."""
    if a.__class__ is not np.ndarray:
        a = np.asarray(a)
    kind = a.dtype.kind
    if kind != "f":
        a = np.abs(a) if kind == "c" else a.astype(np.float64)
    flat = a.ravel("K")
    return float(flat.dot(flat))  # the method: no __array_function__ dispatch, unlike np.dot


def norm_one(g):
    """The L2 norm of one gradient array, as a float; NaN/Inf pass through."""
    if g.__class__ is np.ndarray and g.dtype.kind == "f":
        flat = g.ravel("K")
        total = float(flat.dot(flat))
    else:
        total = _square_sum(g)
    return sqrt(total) if total >= 0 else total


def norm_of(arrays):
    """The L2 norm of a gradient (or several: one per output), as a float; NaN/Inf pass through."""
    if len(arrays) == 1:
        g = arrays[0]
        return 0.0 if g is None else norm_one(g)
    total = 0.0
    for g in arrays:
        if g is not None:
            total += _square_sum(g)
    return sqrt(total) if total >= 0 else total


def nonfinite(array):
    """True when a float array holds NaN or Inf: one dot product; the exact check runs only when that dot is not
    finite (which huge but finite values can also cause)."""
    if array.__class__ is not np.ndarray:
        return False
    kind = array.dtype.kind
    if kind == "f":
        flat = array.ravel("K")
        if isfinite(flat.dot(flat)):  # a BLAS dot raises no floating-point warnings
            return False
    elif kind != "c" or array.size == 0 or isfinite(_square_sum(array)):
        return False
    return not bool(np.isfinite(array).all())


def nonfinite_norm(norm, arrays):
    """Given a norm from ``norm_of``: whether those arrays really hold NaN/Inf (not just an overflowing norm)."""
    if math.isfinite(norm):
        return False
    return any(g is not None and not bool(np.isfinite(g).all()) for g in arrays)


def json_float(value):
    """JSON has no NaN/Inf: write them as the strings ``"nan"``, ``"inf"``, ``"-inf"``."""
    if math.isfinite(value):
        return value
    return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
