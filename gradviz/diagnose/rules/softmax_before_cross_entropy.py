"""softmax-before-cross-entropy: probabilities fed to ``cross_entropy``, which expects logits.

``cross_entropy`` takes log_softmax of its input itself; fed a softmax's output, it computes the log-softmax of
probabilities. Nothing raises and the loss still falls a little, but every class's score is squeezed into
[0, 1], the gradients are tiny and the model learns slowly or not at all. The graph makes it certain: a
``SoftmaxBackward`` node is the input of the loss's ``LogSoftmaxBackward`` (PyTorch) or
``CrossEntropyLossBackward`` (gradviz's engine). A ``log_softmax`` before it is harmless and not flagged.
"""

from ...document import normalise_op
from ...document.index import code_text
from ..call_fixes import is_no_op, without_call
from ..loss_inputs import loss_module, module_of, pairs
from ..records import related
from ..registry import Code, rule

SOFTMAX_BEFORE_CROSS_ENTROPY = Code(
    "softmax-before-cross-entropy", "warning", "a softmax's output fed to cross_entropy, which expects logits",
    explanation="""\
A softmax's output (probabilities) is the input of `F.cross_entropy` / `nn.CrossEntropyLoss`, which expects
raw scores (logits): it applies log_softmax itself. The loss becomes the log-softmax of probabilities, whose
values lie in [0, 1]: the gradients shrink, the classes barely separate, and the model trains slowly or stalls
far from where it should. Nothing raises; the loss even falls a little.

gradviz sees it in the graph: a `SoftmaxBackward` node feeds the loss's `LogSoftmaxBackward` (on gradviz's
engine, its `CrossEntropyLossBackward`), looking through reshapes. The diagnostic is at the line that applied
the softmax (for an `nn.Softmax` layer, the line that called the model, with the layer's path), with the loss's
line as related.

The mistake:

    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 3), nn.Softmax(dim=1))
    loss = nn.CrossEntropyLoss()(model(x), y)

The fix: give the loss the logits, and take the softmax only where probabilities are wanted:

    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 3))
    loss = nn.CrossEntropyLoss()(model(x), y)
    probs = model(x).softmax(dim=1)       # for predictions only

(`log_softmax` followed by `nll_loss` is the same loss as `cross_entropy` on logits, and is not flagged.)
""")

_LOSSES = {"LogSoftmaxBackward", "CrossEntropyLossBackward"}


@rule(SOFTMAX_BEFORE_CROSS_ENTROPY)
def softmax_before_cross_entropy(ctx, out):
    index = ctx.index
    for loss, softmax in pairs(index, _LOSSES, "SoftmaxBackward"):
        if normalise_op(loss.get("op")) == "LogSoftmaxBackward" and not _feeds_nll(index, loss):
            continue  # a plain log_softmax of probabilities: nll-on-probabilities' or the user's own business
        layer = module_of(index, softmax, "Softmax")
        criterion = loss_module(index, loss, ("CrossEntropyLoss",))
        where = index.where(softmax.get("location"))
        what = f"the `nn.Softmax` layer `{layer}` (called at {where})" if layer else f"the softmax at {where}"
        taker = f"`{criterion}` (nn.CrossEntropyLoss)" if criterion else "`cross_entropy`"
        message = (f"{what} feeds {taker} at {index.where(loss.get('location'))}, which applies log_softmax "
                   "itself: it is given probabilities instead of logits, so its gradients are squeezed and the "
                   "model learns slowly or not at all. Nothing raises.")
        out.add(SOFTMAX_BEFORE_CROSS_ENTROPY.code, message, _hint(softmax, layer), softmax.get("location"),
                related=[related("cross-entropy loss here", loss.get("location"))],
                nodes=[softmax["id"], loss["id"]], variables=list(softmax.get("outputs") or ())[:1],
                details={"softmax_module": layer, "loss_module": criterion})


def _feeds_nll(index, log_softmax):
    """PyTorch's cross_entropy: the log_softmax node's consumer is an ``NllLossBackward``."""
    return any(normalise_op(index.nodes[c].get("op")) in ("NllLossBackward", "NllLoss2DBackward")
               for c in index.consumers(log_softmax["id"]) if c in index.nodes)


def _hint(softmax, layer):
    if layer:
        return (f"Remove the `nn.Softmax` layer (`{layer}`) from the model and feed its logits to the loss; apply "
                "`.softmax(dim=1)` to the output only where you need probabilities (predictions).")
    text = code_text(softmax.get("location"))
    fixed = without_call(text, {"softmax"})
    if fixed and is_no_op(fixed):
        return (f"Delete `{text}` and feed the logits to the loss; apply softmax only where you need "
                "probabilities (predictions).")
    if fixed:
        return (f"Feed the logits to the loss: write `{fixed}` instead of `{text}`, and apply softmax only where "
                "you need probabilities (predictions).")
    return "Feed the logits to the loss (drop the softmax before it); apply softmax only for predictions."
