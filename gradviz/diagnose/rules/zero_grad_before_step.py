"""zero-grad-before-step: ``zero_grad()`` between ``backward()`` and ``step()``, so each step is given cleared
gradients. Read from the ``training`` section's ``zero_grad_before_step``: the adapters follow the order of
every backward, ``zero_grad`` and ``step`` (light iterations included), per optimizer."""

from ...document.index import code_text
from ..records import related
from ..registry import Code, rule

ZERO_GRAD_BEFORE_STEP = Code(
    "zero-grad-before-step", "warning", "zero_grad() between backward() and step(): every step gets no gradient",
    explanation="""\
`optimizer.zero_grad()` (or `model.zero_grad()`) ran after `loss.backward()` and before `optimizer.step()`:
the gradients backward just computed are cleared (set to None, or zeroed) before the step reads them. SGD and
Adam skip parameters whose gradient is None, so nothing trains; with zeroed gradients, momentum and weight
decay still move the weights, with no information from the loss. Nothing raises.

gradviz follows the order of every backward, `zero_grad()` and `step()` for each optimizer, on every iteration,
and reports the `zero_grad()` line with the `step()` it emptied as related.

The mistake:

    loss.backward()
    optimizer.zero_grad()
    optimizer.step()

The fix: clear the gradients before the backward (at the top of the step), or after the step:

    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
""")


@rule(ZERO_GRAD_BEFORE_STEP)
def zero_grad_before_step(ctx, out):
    index = ctx.index
    for c in (ctx.doc.get("training") or {}).get("zero_grad_before_step") or ():
        loc, step = c.get("location"), c.get("step_location")
        zero = code_text(loc) or "zero_grad()"
        message = (f"`{zero}` at {index.where(loc)} clears the gradients after backward and before "
                   f"`{code_text(step) or 'step()'}` at {index.where(step)} ({c['optimizer']}): the step is given no "
                   f"gradient, so the model does not learn from the loss (from iteration {c['iteration']}, "
                   f"{c['count']} step{'s' if c['count'] != 1 else ''}). Nothing raises.")
        hint = (f"Move `{zero}` before the forward and `backward()` (the start of each step), or after "
                f"`{code_text(step) or 'step()'}`.")
        out.add(ZERO_GRAD_BEFORE_STEP.code, message, hint, loc,
                related=[related("step given cleared gradients here", step)],
                details={"optimizer": c["optimizer"], "iteration": c["iteration"], "steps": c["count"]})
