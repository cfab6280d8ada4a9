"""train-mode-not-restored: ``model.eval()`` for validation and no ``model.train()`` after it, so the training
steps that follow run with dropout off and batch norm frozen. Read from the ``training`` section: a
mode-dependent module trained in training mode, then set to eval mode by a switch of its root, then trained on
(grad on, a backward through it) in eval mode."""

from ..records import related
from ..registry import Code, rule
from ..training_modes import describe, modules, root_of, switches_touching

TRAIN_MODE_NOT_RESTORED = Code(
    "train-mode-not-restored", "warning", "training went on in eval mode after model.eval(): no model.train() after it",
    explanation="""\
`model.eval()` (for a validation pass) was never undone: the training steps after it run with dropout switched
off and batch norm using its frozen running statistics instead of the batch's. Nothing raises; the model simply
trains without the regularisation (and normalisation) it was built with, from the second epoch on.

gradviz records each dropout/batch-norm module's mode at every call (light iterations too), every
`train()`/`eval()` call, and which calls a backward went through. The finding: a module trained in training mode,
then set to eval mode by `model.eval()`, then trained again (a backward through it) still in eval mode. It is
reported at the training forward's line, with the `eval()` call as related.

The mistake:

    model.train()
    for epoch in range(epochs):
        for x, y in train_loader:
            ...; loss.backward(); optimizer.step()
        model.eval()
        with torch.no_grad():
            validate(model)

The fix: set training mode at the start of each epoch (or right after validation):

    for epoch in range(epochs):
        model.train()
        for x, y in train_loader:
            ...

Freezing batch norm on purpose (`m.eval()` on the norm layers, or a model trained in eval mode from the start)
is not reported: only a root's `eval()` after training in training mode is.
""")


@rule(TRAIN_MODE_NOT_RESTORED)
def train_mode_not_restored(ctx, out):
    doc = ctx.doc
    findings = {}  # (file, line) -> [location, eval switch, modules]
    for m in modules(doc):
        runs = m.get("runs") or []
        trained = [r for r in runs if r["training"] and r["backward"]]
        if not trained:
            continue
        switches = switches_touching(doc, m["module"])
        for r in runs:
            if r["training"] or not r["grad"] or not r["backward"]:
                continue
            before = [t for t in trained if t["end"] < r["order"]]
            if not before:
                continue
            between = [s for s in switches if before[-1]["end"] < s["order"] < r["order"]]
            if not between or between[-1]["mode"] != "eval" or "." in between[-1]["module"]:
                continue  # not a root's eval() after training: a deliberate freeze, or mode set some other way
            loc = r["first"]["location"]
            key = (loc or {}).get("file"), (loc or {}).get("line")
            entry = findings.setdefault(key, [loc, between[-1], [], r, before[-1]])
            entry[2].append(m)
            break
    index = ctx.index
    for loc, switch, found, run, trained in findings.values():
        root = switch["module"]
        message = (f"training went on in eval mode at {index.where(loc)} (iteration {run['first']['iteration']}): "
                   f"`{root}.eval()` at {index.where(switch.get('location'))} switched {describe(found)} to eval "
                   f"mode after {root} had been trained in training mode, and no `{root}.train()` came after it. "
                   "Dropout is off and batch norm uses its frozen statistics for the rest of training; nothing "
                   "raises.")
        hint = (f"Call `{root}.train()` before the training steps, at the start of every epoch (or right after "
                f"the validation that `{root}.eval()` at {index.where(switch.get('location'))} began).")
        out.add(TRAIN_MODE_NOT_RESTORED.code, message, hint, loc,
                related=[related(f"{root}.eval() here", switch.get("location")),
                         related("trained in training mode here", trained["first"]["location"])],
                details={"modules": [m["module"] for m in found], "eval_iteration": switch.get("iteration"),
                         "iteration": run["first"]["iteration"], "root": root_of(found[0]["module"])})
