"""softmax-wrong-dim: a softmax (or log_softmax) over the batch dimension, ``dim=0`` of an (N, C) tensor, feeding
a classification loss: each class's scores are normalised across the examples instead of each example's across
the classes. Read from the graph: the softmax node's ``meta.dim``, its shape, and a loss among the nodes it
feeds."""

import re

from ...document import normalise_op
from ...document.index import code_text
from ..loss_inputs import PASS_THROUGH
from ..records import related
from ..registry import Code, rule

SOFTMAX_WRONG_DIM = Code(
    "softmax-wrong-dim", "warning", "softmax over the batch dimension (dim=0) feeding a classification loss",
    explanation="""\
A softmax or log_softmax over `dim=0` of a `(batch, classes)` tensor normalises each class's scores across the
examples of the batch, not each example's scores across the classes. Fed to `nll_loss` (or anything that
expects per-example class probabilities), the loss is computed on numbers that mean something else: the
model's output for one example depends on the rest of the batch, and accuracy stays poor. Nothing raises.

gradviz reads each softmax node's dimension and shape in the graph and reports one over the first dimension of
a tensor with more than one row that feeds a classification loss (`NLLLoss`, `CrossEntropyLoss`, through a
log), at the softmax's line.

The mistake:

    log_probs = F.log_softmax(model(x), dim=0)     # (N, C): over the batch
    loss = F.nll_loss(log_probs, y)

The fix: normalise over the classes:

    log_probs = F.log_softmax(model(x), dim=1)     # or dim=-1
""")

_SOFTMAX = {"SoftmaxBackward", "LogSoftmaxBackward"}
_LOSSES = {"NllLossBackward", "NllLoss2DBackward", "CrossEntropyLossBackward"}
_BETWEEN = PASS_THROUGH | {"LogBackward", "LogSoftmaxBackward", "SoftmaxBackward"}


@rule(SOFTMAX_WRONG_DIM)
def softmax_wrong_dim(ctx, out):
    index = ctx.index
    for node in index.nodes.values():
        if normalise_op(node.get("op")) not in _SOFTMAX:
            continue
        shape = node.get("shape") or []
        dim = (node.get("meta") or {}).get("dim")
        if not isinstance(dim, int) or len(shape) != 2 or shape[0] < 2 or dim % len(shape) != 0:
            continue
        loss = _feeds_loss(index, node)
        if loss is None:
            continue
        loc = node.get("location")
        text = code_text(loc)
        fixed = re.sub(r"\bdim\s*=\s*0\b", "dim=1", text) if text else None
        name = "log_softmax" if normalise_op(node["op"]) == "LogSoftmaxBackward" else "softmax"
        message = (f"the {name} at {index.where(loc)} normalises over dim {dim} of a {tuple(shape)} tensor, the "
                   f"batch: each class's scores across the {shape[0]} examples, not each example's across the "
                   f"{shape[1]} classes, and it feeds the loss at {index.where(loss.get('location'))}. The loss is "
                   "computed on numbers that mean something else; nothing raises.")
        hint = (f"Normalise over the classes: write `{fixed}`." if fixed and fixed != text else
                f"Normalise over the classes: `{name}(..., dim=1)` (or `dim=-1`).")
        out.add(SOFTMAX_WRONG_DIM.code, message, hint, loc,
                related=[related("loss here", loss.get("location"))], nodes=[node["id"], loss["id"]],
                details={"dim": dim, "shape": shape})


def _feeds_loss(index, node, hops=6):
    """The classification-loss node ``node``'s output reaches through reshapes and logs, or None."""
    frontier = [node["id"]]
    for _ in range(hops):
        following = []
        for nid in frontier:
            for c in index.consumers(nid):
                consumer = index.nodes.get(c)
                if consumer is None:
                    continue
                op = normalise_op(consumer.get("op"))
                if op in _LOSSES and (consumer.get("inputs") or [[None]])[0][0] == nid:
                    return consumer
                if op in _BETWEEN:
                    following.append(c)
        frontier = following
    return None
