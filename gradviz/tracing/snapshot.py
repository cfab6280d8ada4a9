"""``snapshot(*variables)``: a trace document for a graph that already exists, no trace needed.

It walks back from the Variables' ``grad_fn`` through ``next_functions`` (without recursion) and describes what
it finds: ops, edges, shapes, saved tensors with their versions, the leaves. Names come from the caller's
frame: modules bound there name their parameters (``model.fc.weight``), other Variables get their variable
names. Locations and module stacks are unknown for a graph built without a trace, so they are null/empty.
"""

from ..autograd.variable import Variable
from .document import build_document
from .frames import _locals, user_frame
from .recorder import Trace


def _flatten(items):
    for item in items:
        if isinstance(item, (list, tuple)):
            yield from _flatten(item)
        else:
            yield item


def snapshot(*variables):
    """The trace document (a dict, see docs/trace-format.md) of the graph behind ``variables``."""
    tr = Trace()
    frame = user_frame(2)
    if frame is not None:
        for items in (_locals(frame), list(frame.f_globals.items())):
            for name, obj in items:
                if not name.startswith("_") and callable(getattr(obj, "named_parameters", None)) and \
                        callable(getattr(obj, "named_modules", None)) and not isinstance(obj, type):
                    tr._name_module_tree(obj, name)
    groups = tr.groups
    for v in _flatten(variables):
        if not isinstance(v, Variable):
            raise TypeError(f"snapshot() takes Variables, got {type(v).__name__}")
        rec = tr._var_record(v)
        fn = v._grad_fn
        if fn is None:
            continue
        node = tr._node_record(fn)
        if rec.id not in node.outputs:
            node.outputs = node.outputs + (rec.id,)
        if node.dtype is None:
            node.shape, node.dtype = rec.shape, rec.dtype
        if node.graph is None:
            graph = groups.new_graph()
            groups.adopt_into(graph, node, merge=True)
        rec.graph = node.graph
    tr._name_from_frame(frame)
    tr.stopped = True
    groups.freeze()
    return build_document(tr, with_diagnostics=False)
