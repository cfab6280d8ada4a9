"""optimizer-recreated: an optimizer with state (Adam's moments, RMSprop's averages…) built again and again at
the same line over the same parameters, inside the training loop: its state starts from zero each time. Read
from the ``training`` section's ``optimizers`` (each construction's line, iteration and parameter groups)."""

from ...document.index import code_text
from ..registry import Code, rule

OPTIMIZER_RECREATED = Code(
    "optimizer-recreated", "warning", "an optimizer rebuilt inside the loop over the same parameters: its state reset",
    explanation="""\
An optimizer was built again, at the same line and over the same parameters, on later iterations: each new one
starts with empty state. For Adam, AdamW, RMSprop, Adagrad and the like, that state is the running averages of
the gradients that make the steps sensible; reset every time, every step is a first step (Adam's first step
moves every weight by about the learning rate, whatever the gradient's size), and training is noisy or
diverges. A learning-rate scheduler attached to a new optimizer each time never advances either. Nothing
raises.

gradviz records every optimizer's construction (its line, iteration and parameter groups) on every iteration,
and reports a stateful optimizer built at one line on several iterations over the same parameters, at that
line.

The mistake:

    for x, y in loader:
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()

The fix: build it once, before the loop:

    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for x, y in loader:
        ...

Plain SGD without momentum keeps no state and is not reported; a fresh optimizer per task over other
parameters (a cloned model) is not either.
""")

_STATEFUL = {"Adam", "AdamW", "Adamax", "NAdam", "RAdam", "RMSprop", "Adagrad", "Adadelta", "SparseAdam", "ASGD",
             "Rprop", "LBFGS", "Adafactor"}


@rule(OPTIMIZER_RECREATED)
def optimizer_recreated(ctx, out):
    index = ctx.index
    training = ctx.doc.get("training") or {}
    by_line = {}
    for o in training.get("optimizers") or ():
        loc = o.get("location") or {}
        by_line.setdefault((loc.get("file"), loc.get("line"), o["class"]), []).append(o)
    for (_, _, cls), built in by_line.items():
        if cls not in _STATEFUL or len({o["iteration"] for o in built}) < 2:
            continue
        params = [frozenset(v for g in o.get("param_groups") or () for v in g) for o in built]
        if not all(p and p == params[0] for p in params):
            continue  # other parameters each time (a fresh model per task), or none known
        loc = built[0].get("location")
        count = training.get("optimizer_count", len(built)) if len(by_line) == 1 else len(built)
        text = code_text(loc) or f"{cls}(...)"
        message = (f"`{text}` at {index.where(loc)} builds a new {cls} over the same parameters on iteration "
                   f"{built[0]['iteration']} and again on later ones ({count} times): each starts with empty state, "
                   "so every step is a first step and the optimizer's running averages never build up. Nothing "
                   "raises.")
        hint = f"Build the optimizer once, before the training loop: move `{text}` above it."
        out.add(OPTIMIZER_RECREATED.code, message, hint, loc,
                details={"optimizer": cls, "constructions": count,
                         "iterations": [built[0]["iteration"], built[-1]["iteration"]]})
