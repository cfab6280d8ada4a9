"""The named facts an adapter hands the builder: one saved tensor (``SavedFact``), one output of an op
(``OutputFact``), and the edge marker ``LEAF``. See builder.py's module docstring for what each field means.

Named tuples: an adapter builds them by position (``SavedFact(vkey, kind, …)``, no keyword parsing) and the
builder unpacks them by position on its hot path, at a plain tuple's cost (benchmarks/bench_facts.py measures the
choice; docs/performance.md has the figures), while everything else reads them by name.
"""

from collections import namedtuple

LEAF = "leaf"  # the second half of an edge to a leaf's gradient accumulator: (variable_key, LEAF)

SavedFact = namedtuple("SavedFact", "variable kind index shape nbytes version counter block block_bytes device storage",
                       defaults=(None,))
SavedFact.__doc__ = "One tensor a node saved for backward (see builder.py's module docstring)."

OutputFact = namedtuple("OutputFact", "key shape dtype nbytes requires_grad is_leaf name device handle")
OutputFact.__doc__ = ("One output of an op: ``is_leaf`` is False when the op's node is its ``grad_fn`` (an output "
                      "that does not require grad, or an in-place op's, may not have it); ``handle`` is kept on "
                      "its record for the adapter.")
