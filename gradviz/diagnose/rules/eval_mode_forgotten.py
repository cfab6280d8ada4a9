"""eval-mode-forgotten: a trained model evaluated (grad off) with its dropout/batch norm still in training mode,
the mode training left them in. Read from the ``training`` section: a mode-dependent module trained (a backward
went through it in training mode), then called with grad off, still in training mode, with no ``train()`` or
``eval()`` touching it in between."""

from ..records import related
from ..registry import Code, rule
from ..training_modes import describe, modules, root_of, switches_touching

EVAL_MODE_FORGOTTEN = Code(
    "eval-mode-forgotten", "warning",
    "a trained model evaluated without model.eval(): dropout and batch norm in training mode",
    explanation="""\
A model was evaluated (under `torch.no_grad()` or `torch.inference_mode()`) while its dropout and batch-norm
layers were still in training mode: dropout drops units at random, so the predictions are noisy and the measured
accuracy is lower than the model's; batch norm normalises with the evaluation batch's own statistics and updates
its running statistics with the validation data. Nothing raises.

gradviz records each dropout/batch-norm module's mode at every call (light iterations too), every
`train()`/`eval()` call, and which calls a backward went through. The finding: a module trained in training
mode, then called with grad off, still in training mode, with no `train()`/`eval()` call in between. It is
reported at the evaluation's line, with a training line as related.

The mistake:

    for epoch in range(epochs):
        model.train()
        for x, y in train_loader:
            ...
        with torch.no_grad():
            accuracy = evaluate(model, val_loader)   # still in training mode

The fix: switch to evaluation mode for the evaluation, and back for training:

        model.eval()
        with torch.no_grad():
            accuracy = evaluate(model, val_loader)
        model.train()

A training-mode pass under `no_grad` that follows an explicit `train()`/`eval()` call (Monte-Carlo dropout,
test-time batch-norm adaptation) is deliberate and not reported, nor is a module that no backward trained (a
target or teacher network).
""")


@rule(EVAL_MODE_FORGOTTEN)
def eval_mode_forgotten(ctx, out):
    doc = ctx.doc
    findings = {}  # (file, line) -> [location, run, trained run, modules]
    for m in modules(doc):
        runs = m.get("runs") or []
        switches = switches_touching(doc, m["module"])
        for r in runs:
            if not r["training"] or r["grad"]:
                continue
            trained = [t for t in runs if t["training"] and t["backward"] and t["end"] < r["order"]]
            if not trained:
                continue
            if any(trained[-1]["end"] < s["order"] < r["order"] for s in switches):
                continue  # its mode was set on purpose for this pass
            loc = r["first"]["location"]
            key = (loc or {}).get("file"), (loc or {}).get("line")
            findings.setdefault(key, [loc, r, trained[-1], []])[3].append(m)
            break
    index = ctx.index
    for loc, run, trained, found in findings.values():
        root = root_of(found[0]["module"])
        message = (f"{root} was evaluated with grad off at {index.where(loc)} (iteration {run['first']['iteration']}) "
                   f"while {describe(found)} {'was' if len(found) == 1 else 'were'} still in training mode, as "
                   "training left them: dropout keeps "
                   "dropping units and batch norm uses (and updates its running statistics with) the evaluation "
                   "batch. The results are noisy and lower than the model's; nothing raises.")
        hint = (f"Call `{root}.eval()` before this evaluation and `{root}.train()` after it, before the next "
                "training step.")
        out.add(EVAL_MODE_FORGOTTEN.code, message, hint, loc,
                related=[related("trained in training mode here", trained["first"]["location"])],
                details={"modules": [m["module"] for m in found], "iteration": run["first"]["iteration"],
                         "root": root})
