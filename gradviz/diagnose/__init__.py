"""gradviz's diagnostics: pure functions over trace documents (docs/trace-format.md).

``diagnose(doc)`` returns the diagnostic records, ``why_none(doc, variable_id)`` explains one missing gradient,
``explain(code)`` gives a code's long explanation, and ``CODES`` lists every code with its severity and title.
Nothing here touches live engine objects or prints; the catalogue is documented in docs/diagnostics.md.
"""

from ..document import SEVERITIES, DocIndex
from . import backward_rules, ddp_rules, function_rules, graph_rules, registry, silent_rules, training_rules
from .catalogue import CODES, explain
from .records import Collector
from .why import CAUSES, why_none


def diagnose(doc):
    """Every diagnostic for trace document ``doc``, deduplicated by code and line, in location order."""
    index = DocIndex(doc)
    out = Collector()
    none_keys = backward_rules.none_grad(index, out)
    backward_rules.backward_errors(index, out, none_keys)
    backward_rules.stale_versions(index, out)
    silent_rules.silent_inplace(index, out)
    backward_rules.script_exception(index, out)
    graph_rules.graph_cuts(index, out)
    graph_rules.unused_parameters(index, out)
    graph_rules.retained_graphs(index, out)
    training_rules.grad_accumulation(index, out)
    training_rules.nan_inf(index, out)
    training_rules.gradient_scale(index, out)
    training_rules.volatile_deprecated(index, out)
    function_rules.wrong_backward(index, out)
    ddp_rules.diagnose_process(doc, out)  # a one-rank DDP run: a job's ranks are compared at the merge
    ctx = registry.RuleContext(doc, index)
    for r in registry.rules("process"):  # the rules that registered themselves (diagnose/rules/)
        r.function(ctx, out)
    return out.finish()


__all__ = ["diagnose", "why_none", "explain", "CODES", "SEVERITIES", "CAUSES"]
