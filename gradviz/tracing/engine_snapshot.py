"""``snapshot(*variables)``: a trace document for a graph that already exists, no trace needed.

It walks back from the Variables' ``grad_fn`` through ``next_functions`` (without recursion) and describes what
it finds: ops, edges, shapes, saved tensors with their versions, the leaves. Names come from the caller's
frame: modules bound there name their parameters (``model.fc.weight``), other Variables get their variable
names. Locations and module stacks are unknown for a graph built without a trace, so they are null/empty.
"""

from ..autograd.variable import Variable
from .adapters.gradviz.engine import GradvizAdapter
from .builder import TraceBuilder
from .frames import _locals, user_frame
from .snapshot_args import flattened


def snapshot(*variables):
    """The trace document (a dict, see docs/trace-format.md) of the graph behind ``variables``."""
    builder = TraceBuilder()
    adapter = GradvizAdapter(builder)  # describes; never attached
    frame = user_frame(2)
    if frame is not None:
        for items in (_locals(frame), list(frame.f_globals.items())):
            for name, obj in items:
                if not name.startswith("_") and callable(getattr(obj, "named_parameters", None)) and \
                        callable(getattr(obj, "named_modules", None)) and not isinstance(obj, type):
                    adapter.name_module_tree(obj, name)
    for v in flattened(variables):
        if not isinstance(v, Variable):
            raise TypeError(f"snapshot() takes Variables, got {type(v).__name__}")
        adapter.describe(v)
    adapter.finish(frame)
    builder.stop()
    return builder.document(with_diagnostics=False)
