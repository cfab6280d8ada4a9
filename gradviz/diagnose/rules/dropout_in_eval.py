"""dropout-in-eval: ``F.dropout(x, p)`` in a module's ``forward`` without ``training=self.training``, so dropout
stays on when the model is in eval mode. Read from the ``training`` section's ``functional_dropout``: the
adapters see each functional dropout call left at its default ``training=True`` from the forward of a module in
eval mode (an explicit ``training=True``, Monte-Carlo dropout, is not recorded)."""

from ...document.index import code_text
from ..call_fixes import with_keyword
from ..records import related
from ..registry import Code, rule

DROPOUT_IN_EVAL = Code(
    "dropout-in-eval", "warning", "F.dropout without training=self.training: dropout on in eval mode",
    explanation="""\
`F.dropout(x, p)` (and `F.dropout2d`…) does not know the module's mode: its `training` argument defaults to
True. Called in a `forward` without `training=self.training`, it keeps dropping units after `model.eval()`:
every evaluation and prediction is noisy, and lower than the model can do. Nothing raises.

gradviz wraps the functional dropouts while tracing (every iteration, light ones included) and records a call
that left `training` at its default from the `forward` of a module in eval mode. It is reported at the
`F.dropout` line, with the `eval()` call and the evaluation's line as related.

The mistake:

    class Net(nn.Module):
        def forward(self, x):
            h = F.dropout(torch.relu(self.hidden(x)), p=0.5)   # on in eval mode too
            return self.out(h)

The fix: pass the module's mode (or use an `nn.Dropout` layer, which follows `model.eval()` itself):

            h = F.dropout(torch.relu(self.hidden(x)), p=0.5, training=self.training)

An explicit `training=True` (Monte-Carlo dropout at evaluation) is deliberate and not reported.
""")


@rule(DROPOUT_IN_EVAL)
def dropout_in_eval(ctx, out):
    doc = ctx.doc
    training = doc.get("training") or {}
    switches = sorted(training.get("switches") or (), key=lambda s: s.get("order", 0))
    index = ctx.index
    for d in training.get("functional_dropout") or ():
        module = d["module"]
        switch = next((s for s in reversed(switches) if s["mode"] == "eval" and s["order"] < d["order"]
                       and (module == s["module"] or module.startswith(s["module"] + "."))), None)
        text = code_text(d.get("location"))
        fixed = with_keyword(text, {d["function"]}, "training=self.training")
        message = (f"`F.{d['function']}` at {index.where(d.get('location'))} left `training` at its default (True) "
                   f"in the forward of `{module}` ({d['class']}), which was in eval mode"
                   + (f" (`{switch['module']}.eval()` at {index.where(switch.get('location'))})" if switch else "")
                   + f": dropout stayed on during the evaluation at {index.where(d.get('caller'))} "
                   f"(iteration {d['iteration']}), so its results are noisy and lower than the model's. "
                   "Nothing raises.")
        hint = (f"Pass the module's mode: write `{fixed}`" if fixed
                else f"Pass `training=self.training` to `F.{d['function']}`")
        hint += " (or use an `nn.Dropout` layer, which follows `model.eval()`)."
        out.add(DROPOUT_IN_EVAL.code, message, hint, d.get("location"),
                related=[related(f"{switch['module']}.eval() here", switch.get("location")) if switch else None,
                         related("evaluated here", d.get("caller"))],
                details={"module": module, "function": d["function"], "iteration": d["iteration"],
                         "count": d["count"]})
