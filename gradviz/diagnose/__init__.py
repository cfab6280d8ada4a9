"""gradviz's diagnostics: pure functions over trace documents (docs/trace-format.md).

``diagnose(doc)`` returns the diagnostic records, ``why_none(doc, variable_id)`` explains one missing gradient,
``explain(code)`` gives a code's long explanation, and ``CODES`` lists every code with its severity and title.
Nothing here touches live engine objects or prints; the catalogue is documented in docs/diagnostics.md.

Each diagnostic is a rule in ``rules/`` with its codes beside it, registered in ``registry.py``; a job's ranks
are compared by ``ddp_rules.diagnose_job``.
"""

from ..document import SEVERITIES, DocIndex
from . import registry
from .catalogue import CODES, explain
from .records import Collector
from .why import CAUSES, why_none


def diagnose(doc):
    """Every diagnostic for trace document ``doc``, deduplicated by code and line, in location order."""
    ctx = registry.RuleContext(doc, DocIndex(doc))
    out = Collector()
    for r in registry.rules("process"):
        r.function(ctx, out)
    return out.finish()


__all__ = ["diagnose", "why_none", "explain", "CODES", "SEVERITIES", "CAUSES"]
