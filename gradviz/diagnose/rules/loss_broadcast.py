"""loss-broadcast: a prediction of shape (N, 1) and a target of shape (N,) combined elementwise in a hand-written
loss, which broadcasts them to (N, N): every prediction is compared with every target. Read from the graph: an
elementwise node whose output is larger than both inputs, one input made by the model (it requires grad) and the
other a target (no grad), shapes (N, 1) and (N,)."""

from ...document import normalise_op
from ...document.index import code_text
from ..records import related
from ..registry import Code, rule

LOSS_BROADCAST = Code(
    "loss-broadcast", "warning", "a (N, 1) prediction and an (N,) target broadcast to (N, N) in a loss",
    explanation="""\
A prediction of shape `(N, 1)` minus (or times, or divided by) a target of shape `(N,)` does not raise: the two
broadcast to `(N, N)`, every prediction compared with every target. A loss written by hand over that matrix
(`((pred - y) ** 2).mean()`) is minimised by predicting the targets' mean for every input: the model learns
only the mean. Nothing raises (`F.mse_loss` warns about different sizes; a hand-written loss does not).

gradviz sees it in the graph: an elementwise node (`SubBackward`, `MulBackward`, `DivBackward`, `AddBackward`)
whose output is larger than both its inputs, one of them from the model (requires grad) with shape `(N, 1)`,
the other without grad with shape `(N,)`. It is reported at the loss's line, naming both.

The mistake:

    pred = model(x)                  # (N, 1)
    loss = ((pred - y) ** 2).mean()  # y: (N,) -> (N, N)

The fix: make the shapes equal:

    loss = ((pred.squeeze(1) - y) ** 2).mean()     # or y.unsqueeze(1), or F.mse_loss(pred.squeeze(1), y)

Pairwise terms written on purpose (`a[:, None] - b[None, :]`, shapes `(N, 1)` and `(1, N)`) are not
reported.
""")

_ELEMENTWISE = {"SubBackward", "RsubBackward", "AddBackward", "MulBackward", "DivBackward"}


@rule(LOSS_BROADCAST)
def loss_broadcast(ctx, out):
    index = ctx.index
    for node in index.nodes.values():
        if normalise_op(node.get("op")) not in _ELEMENTWISE:
            continue
        found = _column_against_vector(index, node)
        if found is None:
            continue
        pred, target = found
        loc = node.get("location")
        p, t = index.var_name(pred["id"]), index.var_name(target["id"])
        n = pred["shape"][0]
        message = (f"{index.var_label(pred['id'])} and {index.var_label(target['id'])} broadcast to ({n}, {n}) at "
                   f"{index.where(loc)}: every prediction is compared with every target, and a loss over that "
                   "matrix is minimised by predicting the targets' mean. Nothing raises.")
        text = code_text(loc)
        hint = (f"Make the shapes equal: `{p}.squeeze(1)` (or `{t}.unsqueeze(1)`) in `{text}`." if text else
                f"Make the shapes equal: `{p}.squeeze(1)` or `{t}.unsqueeze(1)`.")
        out.add(LOSS_BROADCAST.code, message, hint, loc,
                related=[related(f"{p} made here", pred.get("location"))],
                nodes=[node["id"]], variables=[pred["id"], target["id"]],
                details={"prediction": p, "target": t, "shape": [n, n]})


def _column_against_vector(index, node):
    """(prediction, target) Variables when ``node`` combined a grad-requiring (N, 1) with a no-grad (N,) into an
    (N, N) output (N > 1); else None."""
    shape = node.get("shape") or []
    ids = [v for v in (node.get("input_variables") or [])[:2] if v is not None]
    if len(shape) != 2 or shape[0] != shape[1] or shape[0] < 2 or len(ids) != 2:
        return None
    a, b = (index.variables.get(v) for v in ids)
    if a is None or b is None:
        return None
    for pred, target in ((a, b), (b, a)):
        if (list(pred.get("shape") or ()) == [shape[0], 1] and list(target.get("shape") or ()) == [shape[0]]
                and pred.get("requires_grad") and not target.get("requires_grad")):
            return pred, target
    return None
