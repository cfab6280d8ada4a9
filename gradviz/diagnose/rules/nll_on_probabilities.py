"""nll-on-probabilities: ``nll_loss`` fed a softmax's output (probabilities) instead of log-probabilities. The
graph makes it certain: a ``SoftmaxBackward`` node is the ``NllLossBackward`` node's first input, with no log in
between."""

from ...document.index import code_text
from ..call_fixes import without_call
from ..loss_inputs import loss_module, module_of, pairs
from ..records import related
from ..registry import Code, rule

NLL_ON_PROBABILITIES = Code(
    "nll-on-probabilities", "warning", "NLLLoss fed probabilities (a softmax's output), not log-probabilities",
    explanation="""\
`nn.NLLLoss` / `F.nll_loss` takes log-probabilities: it returns minus the input at the target class. Fed a
softmax's output (probabilities, no log), it returns minus a probability: the loss lies between -1 and 0, its
gradient does not grow for confidently wrong predictions, and the model learns much less than it should.
Nothing raises; the loss even goes down (towards -1).

gradviz sees it in the graph: a `SoftmaxBackward` node feeds the `NllLossBackward` node (looking through
reshapes) with no `log` in between. The diagnostic is at the softmax's line (for an `nn.Softmax` layer, the
line that called the model, with the layer's path), with the loss's line as related.

The mistake:

    probs = F.softmax(model(x), dim=1)
    loss = F.nll_loss(probs, y)

The fix: give it log-probabilities (or give `cross_entropy` the logits):

    log_probs = F.log_softmax(model(x), dim=1)   # nn.LogSoftmax(dim=1) as a layer
    loss = F.nll_loss(log_probs, y)
""")


@rule(NLL_ON_PROBABILITIES)
def nll_on_probabilities(ctx, out):
    index = ctx.index
    for loss, softmax in pairs(index, {"NllLossBackward", "NllLoss2DBackward"}, "SoftmaxBackward"):
        layer = module_of(index, softmax, "Softmax")
        criterion = loss_module(index, loss, ("NLLLoss",))
        where = index.where(softmax.get("location"))
        what = f"the `nn.Softmax` layer `{layer}` (called at {where})" if layer else f"the softmax at {where}"
        taker = f"`{criterion}` (nn.NLLLoss)" if criterion else "`nll_loss`"
        message = (f"{what} feeds {taker} at {index.where(loss.get('location'))}, which expects "
                   "log-probabilities: given probabilities, the loss is minus a probability (between -1 and 0) and "
                   "confidently wrong predictions are barely penalised. Nothing raises.")
        out.add(NLL_ON_PROBABILITIES.code, message, _hint(softmax, layer), softmax.get("location"),
                related=[related("NLL loss here", loss.get("location"))],
                nodes=[softmax["id"], loss["id"]], variables=list(softmax.get("outputs") or ())[:1],
                details={"softmax_module": layer, "loss_module": criterion})


def _hint(softmax, layer):
    if layer:
        return (f"Replace the `nn.Softmax` layer (`{layer}`) with `nn.LogSoftmax` (same `dim`), or drop it and use "
                "`nn.CrossEntropyLoss` on the logits.")
    text = code_text(softmax.get("location"))
    fixed = _log_softmax(text)
    if fixed:
        return f"Give the loss log-probabilities: write `{fixed}` instead of `{text}`."
    return "Give the loss log-probabilities: `log_softmax` instead of `softmax` (or `cross_entropy` on the logits)."


def _log_softmax(text):
    """The line with its one softmax call made a log_softmax call (``F.softmax(x, 1)`` -> ``F.log_softmax(x,
    1)``), when the line has exactly one."""
    if not text or without_call(text, {"softmax"}) is None or text.count("softmax(") != 1:
        return None
    return text.replace("softmax(", "log_softmax(")
