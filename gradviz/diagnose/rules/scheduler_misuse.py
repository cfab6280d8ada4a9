"""scheduler-misuse: a learning-rate scheduler stepped before its optimizer (the schedule's first value is
skipped), or an epoch schedule stepped once per batch (the rate collapses in the first epochs and the rest of
the training moves nothing). Read from the ``training`` section's ``scheduler_misuse``: the adapters wrap the
schedulers' construction and ``step()`` and follow them against each optimizer's steps, light iterations
included."""

from ...document.index import code_text
from ..records import related
from ..registry import Code, rule

SCHEDULER_MISUSE = Code(
    "scheduler-misuse", "warning",
    "scheduler.step() before optimizer.step(), or an epoch schedule stepped per batch",
    explanation="""\
A learning-rate scheduler rewrites its optimizer's `lr` each time `scheduler.step()` is called. Two mistakes
raise nothing (PyTorch warns once for the first, without a line to fix):

- `scheduler.step()` before `optimizer.step()`: the schedule's first value is skipped, so every epoch (or
  batch) runs at the rate meant for the next one; with a decaying schedule the whole run trains at smaller
  rates than intended, with a warm-up the first step is lost.
- An epoch schedule (`StepLR`, `MultiStepLR`, `ExponentialLR`…) stepped inside the batch loop: `step_size=2`
  now means two batches, and the rate falls by orders of magnitude in the first epoch; the rest of the run
  barely moves the weights.

gradviz wraps every scheduler's construction and `step()`, and follows them against the optimizer's steps on
every iteration. It reports a first `scheduler.step()` that came before any step of its optimizer, and a
schedule stepped about once per optimizer step whose rate fell under 1/1000 of its first value and stayed
there for more than half of the optimizer's steps.

The mistakes:

    for epoch in range(epochs):
        scheduler.step()                 # before this epoch's optimizer steps
        for x, y in loader:
            ...
            optimizer.step()
            scheduler.step()             # StepLR(step_size=2) counts batches now

The fix: step an epoch schedule once per epoch, after the loop over batches:

    for epoch in range(epochs):
        for x, y in loader:
            ...
            optimizer.step()
        scheduler.step()

Schedules meant per batch (`OneCycleLR`, `CyclicLR`, a warm-up `LambdaLR`, cosine over all the steps) do not
stay collapsed and are not reported; neither is a rate that comes back up (warm restarts).
""")


@rule(SCHEDULER_MISUSE)
def scheduler_misuse(ctx, out):
    index = ctx.index
    for s in (ctx.doc.get("training") or {}).get("scheduler_misuse") or ():
        loc, built, cls = s.get("location"), s.get("built"), s["class"]
        text = code_text(loc) or "scheduler.step()"
        if s["kind"] == "before":
            step = s.get("step_location")
            step_text = code_text(step) or "optimizer.step()"
            message = (f"`{text}` at {index.where(loc)} steps the {cls} schedule before its optimizer has "
                       f"stepped (iteration {s['iteration']}): the schedule's first learning rate "
                       f"({s['first_lr']:g}) is skipped and every step after runs at the rate meant for the next "
                       "one. Nothing raises.")
            where = f" at {index.where(step)}" if step else ""
            hint = (f"Call `{text}` after `{step_text}`{where}: for a schedule in epochs, once at the end of the "
                    "epoch, after the loop over batches.")
            links = [related("the optimizer's step it came before", step), related("scheduler built here", built)]
            details = {"kind": "before", "scheduler": cls, "iteration": s["iteration"]}
        else:
            message = (f"`{text}` at {index.where(loc)} steps the {cls} schedule about once per optimizer step "
                       f"({s['scheduler_steps']} scheduler steps for {s['optimizer_steps']} optimizer steps): the "
                       f"learning rate fell from {s['first_lr']:g} to {s['lr']:.3g} after "
                       f"{s['collapsed_after']} steps and stayed there, so the last "
                       f"{s['optimizer_steps'] - s['collapsed_after']} steps barely moved the weights. Nothing "
                       "raises.")
            hint = (f"{cls} counts epochs: call `{text}` once per epoch, after the loop over batches (dedent it "
                    "out of the batch loop), or give the schedule its length in batches.")
            links = [related("scheduler built here", built)]
            details = {"kind": "collapse", "scheduler": cls, "iteration": s["iteration"],
                       "collapsed_after": s["collapsed_after"], "optimizer_steps": s["optimizer_steps"],
                       "scheduler_steps": s["scheduler_steps"]}
        out.add(SCHEDULER_MISUSE.code, message, hint, loc, related=[r for r in links if r], details=details)
