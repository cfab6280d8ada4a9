"""freeze-ineffective: ``module.requires_grad = False`` sets a plain attribute on the module and freezes nothing;
its parameters keep training. Read from the ``training`` section's ``freeze_ineffective``: the adapters see the
assignment (``nn.Module.__setattr__``, wrapped for that one name) and, at the next optimizer steps, whether the
module's parameters still have gradients that the stepping optimizer holds (light iterations included). The
other half, ``frozen_still_changing`` (PyTorch): parameters frozen with their ``.grad`` left set, which an
optimizer step still changed (compared before and after the step)."""

import re

from ...document.index import code_text
from ..records import related
from ..registry import Code, rule

FREEZE_INEFFECTIVE = Code(
    "freeze-ineffective", "warning", "module.requires_grad = False freezes nothing: its parameters still train",
    explanation="""\
`requires_grad` is a flag of tensors, not of modules. `model.backbone.requires_grad = False` sets a new plain
attribute on the module object (PyTorch allows any attribute); every parameter inside keeps
`requires_grad=True`, gets gradients and is updated by the optimizer. The "frozen" pretrained layers drift,
fine-tuning forgets what they knew, and the run costs the backward through them. Nothing raises.

gradviz sees the assignment and, at the following optimizer steps, whether that module's parameters still have
gradients that the stepping optimizer holds; it reports the assignment's line, with the step as related.

The mistake:

    model.backbone.requires_grad = False

The fix: set the parameters' flag, with the module method that does it for all of them:

    model.backbone.requires_grad_(False)
    # or: for p in model.backbone.parameters(): p.requires_grad = False

A module whose class defines its own `requires_grad` (a property) is not reported; neither is a module whose
parameters were frozen after the assignment.

The other way a freeze fails (PyTorch): an optimizer updates every parameter whose `.grad` is not None, whatever
its `requires_grad`. A parameter frozen after a backward, or in a loop that clears with
`zero_grad(set_to_none=False)` (zeros, not None: PyTorch 1.x's default), keeps a gradient; the stale gradient,
momentum, Adam's running averages or AdamW's weight decay keep moving it. gradviz copies the frozen parameters
that hold a gradient at each step's start and compares after it: one that changed is reported at the freeze's
line, with the step as related.

    for p in model.backbone.parameters():
        p.requires_grad = False
    ...
    optimizer.zero_grad(set_to_none=False)      # the frozen weights keep a zero .grad: Adam still moves them

The fix: drop their gradients when freezing (then every optimizer skips them), or leave them out of it:

    for p in model.backbone.parameters():
        p.requires_grad = False
        p.grad = None
""")

_TARGET = re.compile(r"^\s*(.+?)\.requires_grad\s*=")


@rule(FREEZE_INEFFECTIVE)
def freeze_ineffective(ctx, out):
    index = ctx.index
    for f in (ctx.doc.get("training") or {}).get("freeze_ineffective") or ():
        loc, step = f.get("location"), f.get("step_location")
        text = code_text(loc) or "module.requires_grad = False"
        found = _TARGET.match(text)
        target = found.group(1) if found else (f["module"] or "module")
        names = ", ".join(f"`{n}`" for n in f["parameters"][:4]) + (" …" if f["training"] > 4 else "")
        message = (f"`{text}` at {index.where(loc)} sets a plain attribute on the {f['class']} "
                   f"`{f['module'] or target}`: it freezes nothing. {f['training']} of its {f['total']} parameters "
                   f"({names}) still got gradients and were stepped at {index.where(step)} (iteration "
                   f"{f['step_iteration']}). Nothing raises.")
        hint = (f"Write `{target}.requires_grad_(False)` (the method sets every parameter's flag), or "
                f"`for p in {target}.parameters(): p.requires_grad = False`.")
        out.add(FREEZE_INEFFECTIVE.code, message, hint, loc,
                related=[r for r in [related("its parameters stepped here", step)] if r],
                details={"module": f["module"], "parameters": f["parameters"], "training": f["training"],
                         "total": f["total"], "iteration": f["iteration"]})
    for f in (ctx.doc.get("training") or {}).get("frozen_still_changing") or ():
        _still_changing(index, f, out)


def _still_changing(index, f, out):
    """Parameters frozen at ``f["location"]`` that an optimizer step still changed."""
    loc, step = f.get("location"), f.get("step_location")
    text = code_text(loc) or "requires_grad = False"
    names = ", ".join(f"`{n}`" for n in f["parameters"][:4]) + (" …" if f["count"] > 4 else "")
    named = f" ({names})" if f["parameters"] else ""
    why = ("their stale gradients" if f["stale"] else
           "momentum, running averages or weight decay (their gradients are zeros, not None)")
    message = (f"`{text}` at {index.where(loc)} froze {f['count']} parameter(s){named}, but their `.grad` stayed "
               f"set, and {f['optimizer']} updates every parameter whose `.grad` is not None: the step at "
               f"{index.where(step)} still changed them, by {why}, on {f['steps']} step(s) from iteration "
               f"{f['step_iteration']}. Nothing raises.")
    hint = ("Drop their gradients when freezing: `p.grad = None` beside `p.requires_grad = False` (or clear with "
            "`zero_grad(set_to_none=True)`, the default), or build the optimizer over the trained parameters only.")
    out.add(FREEZE_INEFFECTIVE.code, message, hint, loc,
            related=[r for r in [related("still changed by this step", step)] if r],
            details={"parameters": f["parameters"], "count": f["count"], "stale": f["stale"],
                     "optimizer": f["optimizer"], "steps": f["steps"], "iteration": f["step_iteration"]})
