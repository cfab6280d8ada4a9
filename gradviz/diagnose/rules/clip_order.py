"""clip-order: ``clip_grad_norm_``/``clip_grad_value_`` called before ``backward()`` or after ``step()``, so the
step uses unclipped gradients. Read from the ``training`` section's ``clip_order``: the adapters wrap the
clipping functions and follow the order of every backward and step (light iterations included)."""

from ...document.index import code_text
from ..records import related
from ..registry import Code, rule

CLIP_ORDER = Code(
    "clip-order", "warning", "gradients clipped before backward() or after step(): the step is never clipped",
    explanation="""\
`torch.nn.utils.clip_grad_norm_` (or `clip_grad_value_`) clips the gradients that are in `.grad` when it runs.
Called after `optimizer.step()`, it clips gradients the step has already applied; called before
`loss.backward()`, it clips the previous (or cleared) gradients, and backward then writes new, unclipped ones.
Either way every step uses unclipped gradients: a spike that clipping was meant to stop goes through (often as
a NaN later). Nothing raises.

gradviz wraps the clipping functions and follows the order of every backward and step, on every iteration; a
clipping call with no backward since the last step is reported at its line, with that step as related.

The mistakes:

    optimizer.zero_grad()
    clip_grad_norm_(model.parameters(), 1.0)      # before backward: clips nothing useful
    loss.backward()
    optimizer.step()

    loss.backward()
    optimizer.step()
    clip_grad_norm_(model.parameters(), 1.0)      # after step: too late

The fix: clip between backward and step:

    loss.backward()
    clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
""")


@rule(CLIP_ORDER)
def clip_order(ctx, out):
    index = ctx.index
    for c in (ctx.doc.get("training") or {}).get("clip_order") or ():
        loc, step = c.get("location"), c.get("step_location")
        text = code_text(loc) or f"{c['function']}(...)"
        if c.get("after_step"):
            when = f"after `step()`{f' at {index.where(step)}' if step else ''} and before the next backward"
        else:
            when = "before any backward had written the gradients it clips"
        message = (f"`{text}` at {index.where(loc)} runs {when}: it clips gradients that were already applied or "
                   "are about to be replaced, so every step uses unclipped gradients "
                   f"(from iteration {c['iteration']}, {c['count']} call{'s' if c['count'] != 1 else ''}). "
                   "Nothing raises.")
        hint = f"Call `{text}` after `loss.backward()` and before `optimizer.step()`."
        out.add(CLIP_ORDER.code, message, hint, loc,
                related=[related("the step it came after", step)] if c.get("after_step") else [],
                details={"function": c["function"], "iteration": c["iteration"], "calls": c["count"],
                         "after_step": c.get("after_step", False)})
