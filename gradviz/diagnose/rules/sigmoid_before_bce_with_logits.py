"""sigmoid-before-bce-with-logits: probabilities fed to ``binary_cross_entropy_with_logits``, which applies the
sigmoid itself. The graph makes it certain: a ``SigmoidBackward`` node is the loss node's first input."""

from ...document.index import code_text
from ..call_fixes import is_no_op, without_call
from ..loss_inputs import loss_module, module_of, pairs
from ..records import related
from ..registry import Code, rule

SIGMOID_BEFORE_BCE_WITH_LOGITS = Code(
    "sigmoid-before-bce-with-logits", "warning",
    "a sigmoid's output fed to BCEWithLogitsLoss, which applies the sigmoid itself",
    explanation="""\
A sigmoid's output is the input of `nn.BCEWithLogitsLoss` / `F.binary_cross_entropy_with_logits`, which
expects raw scores (logits) and applies the sigmoid itself. The loss then sees sigmoid(sigmoid(x)), which lies
in [0.5, 0.73]: a negative example can never be scored below 0.5, the gradients are small, and the classifier
settles on a poor threshold. Nothing raises.

gradviz sees it in the graph: a `SigmoidBackward` node feeds the loss's
`BinaryCrossEntropyWithLogitsBackward` (looking through reshapes). The diagnostic is at the line that applied
the sigmoid (for an `nn.Sigmoid` layer, the line that called the model, with the layer's path), with the loss's
line as related.

The mistake:

    logits = model(x)
    loss = nn.BCEWithLogitsLoss()(torch.sigmoid(logits), y)

The fix: give the loss the logits; take the sigmoid only to predict:

    loss = nn.BCEWithLogitsLoss()(logits, y)
    predicted = torch.sigmoid(logits) > 0.5

(or keep the sigmoid and use `nn.BCELoss`, which takes probabilities, less stably.)
""")


@rule(SIGMOID_BEFORE_BCE_WITH_LOGITS)
def sigmoid_before_bce_with_logits(ctx, out):
    index = ctx.index
    for loss, sigmoid in pairs(index, {"BinaryCrossEntropyWithLogitsBackward"}, "SigmoidBackward"):
        layer = module_of(index, sigmoid, "Sigmoid")
        criterion = loss_module(index, loss, ("BCEWithLogitsLoss",))
        where = index.where(sigmoid.get("location"))
        what = f"the `nn.Sigmoid` layer `{layer}` (called at {where})" if layer else f"the sigmoid at {where}"
        taker = (f"`{criterion}` (nn.BCEWithLogitsLoss)" if criterion
                 else "`binary_cross_entropy_with_logits`")
        message = (f"{what} feeds {taker} at {index.where(loss.get('location'))}, which applies the sigmoid "
                   "itself: the loss sees sigmoid(sigmoid(x)), always between 0.5 and 0.73, so no example can be "
                   "scored negative and the gradients are small. Nothing raises.")
        out.add(SIGMOID_BEFORE_BCE_WITH_LOGITS.code, message, _hint(sigmoid, layer), sigmoid.get("location"),
                related=[related("BCE-with-logits loss here", loss.get("location"))],
                nodes=[sigmoid["id"], loss["id"]], variables=list(sigmoid.get("outputs") or ())[:1],
                details={"sigmoid_module": layer, "loss_module": criterion})


def _hint(sigmoid, layer):
    if layer:
        return (f"Remove the `nn.Sigmoid` layer (`{layer}`) from the model and feed its logits to the loss; apply "
                "`torch.sigmoid` to the output only to predict (or keep it and use `nn.BCELoss`).")
    text = code_text(sigmoid.get("location"))
    fixed = without_call(text, {"sigmoid"})
    if fixed and is_no_op(fixed):
        return f"Delete `{text}` and feed the logits to the loss; apply `torch.sigmoid` only to predict."
    if fixed:
        return (f"Feed the logits to the loss: write `{fixed}` instead of `{text}`, and apply `torch.sigmoid` only "
                "to predict (or keep the sigmoid and use `nn.BCELoss`).")
    return "Feed the logits to the loss (drop the sigmoid before it); apply `torch.sigmoid` only to predict."
