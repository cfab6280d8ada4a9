"""accumulation-not-scaled: gradient accumulation (one ``backward()`` line run k times per optimizer step) on a
loss averaged over its batch, with no 1/k: each step applies k times the gradient of the mean over the k
batches. Read from the ``training`` section's ``accumulation_not_scaled``: the adapters count every backward
per line between optimizer steps and name its root's op (light iterations included)."""

import re

from ...document.index import code_text
from ..records import related
from ..registry import Code, rule

ACCUMULATION_NOT_SCALED = Code(
    "accumulation-not-scaled", "info",
    "k backward() calls per step on a mean loss, not divided by k: the step is k times too large",
    explanation="""\
Gradient accumulation calls `loss.backward()` on k small batches and then `optimizer.step()` once, to train as
if on one batch k times larger. Gradients add up in `.grad`: with losses averaged over their batch
(`reduction="mean"`, the default of every loss), the step gets the sum of k mean gradients, k times the
gradient of the mean over the k batches. With SGD that multiplies the learning rate by k (the run tuned at one
batch diverges or jumps around); Adam mostly cancels the factor, but weight decay and `clip_grad_norm_`
thresholds no longer mean what they say. Nothing raises.

gradviz counts the backward calls of each line between optimizer steps, on every iteration, and reports a line
run more than once per step (on at least two steps) whose root is the mean loss itself (nothing divided it).
It is information, not a certain mistake: summing on purpose (one backward per task, each loss meant at full
weight) is written the same way.

The mistake:

    for i, (x, y) in enumerate(loader):
        loss = loss_fn(model(x), y)
        loss.backward()
        if (i + 1) % 4 == 0:
            optimizer.step()
            optimizer.zero_grad()

The fix: divide each loss by the number of batches accumulated:

        (loss / 4).backward()
""")

_RECEIVER = re.compile(r"^\s*(.+?)\.backward\(")


@rule(ACCUMULATION_NOT_SCALED)
def accumulation_not_scaled(ctx, out):
    index = ctx.index
    for u in (ctx.doc.get("training") or {}).get("accumulation_not_scaled") or ():
        loc, step, k = u.get("location"), u.get("step_location"), u["calls"]
        text = code_text(loc) or "loss.backward()"
        receiver = _RECEIVER.match(text)
        fixed = f"({receiver.group(1)} / {k}).backward()" if receiver else f"loss = loss / {k}"
        message = (f"`{text}` at {index.where(loc)} runs {k} times per optimizer step (on {u['steps']} steps, from "
                   f"iteration {u['iteration']}), each on a loss averaged over its batch ({u['op']}) that nothing "
                   f"divides by {k}: the step applies the sum of {k} mean gradients, {k} times the gradient of the "
                   f"mean over the {k} batches, as if the learning rate were {k} times larger. Nothing raises.")
        hint = (f"Divide the loss by the number of batches accumulated: write `{fixed}` (or scale the learning rate "
                "down if the sum is meant).")
        out.add(ACCUMULATION_NOT_SCALED.code, message, hint, loc,
                related=[r for r in [related("the step that applies the sum", step)] if r],
                details={"calls_per_step": k, "steps": u["steps"], "iteration": u["iteration"], "loss": u["op"]})
