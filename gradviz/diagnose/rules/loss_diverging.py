"""loss-diverging: the loss rose by orders of magnitude above its lowest value, then became NaN/Inf or stayed
there: the steps are too large. Read from the ``training`` section's ``loss_diverging``: the adapters read
every backward's scalar loss (light iterations included) and keep, per backward line, its lowest value and the
first time it rose RISE times above it, with the optimizer built last (its line and learning rate)."""

from ...document.index import code_text
from ..records import related
from ..registry import Code, rule

LOSS_DIVERGING = Code(
    "loss-diverging", "warning", "the loss rose by orders of magnitude before NaN: the learning rate is too high",
    explanation="""\
A loss that falls and then climbs by orders of magnitude, ending in `inf` or `nan`, is the signature of steps
too large for the surface: each update overshoots, the gradients grow with the error, and the next update
overshoots further. The usual cause is the learning rate (or the loss scale: gradients summed where a mean was
meant). Nothing raises until the NaN, and then only the op that made it is visible, far from the cause.

gradviz reads the value of every backward's scalar loss, on every iteration, and reports a positive loss that
rose 1,000 times above its lowest value and then became NaN/Inf or stayed that high, at the line of the
optimizer built last, with its learning rate; the backward where the loss rose is related.

The mistake:

    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)   # too large for this model

The fix: a smaller learning rate (ten times smaller is the usual first try), or clipping the gradients:

    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    ...
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()

A loss that is negative or zero at its lowest (a log-likelihood, a GAN's losses) is not judged.
""")


@rule(LOSS_DIVERGING)
def loss_diverging(ctx, out):
    index = ctx.index
    for s in (ctx.doc.get("training") or {}).get("loss_diverging") or ():
        backward, opt_loc, lr = s.get("location"), s.get("optimizer_location"), s.get("lr")
        ended = (f"became NaN/Inf at iteration {s['nonfinite_iteration']}" if s.get("nonfinite_iteration")
                 is not None else f"ended at {s['last']:.3g}")
        rate = f" (lr={lr:g})" if lr is not None else ""
        message = (f"The loss backpropagated at {index.where(backward)} fell to {s['min']:.3g} (iteration "
                   f"{s['min_iteration']}), rose to {s['rise_value']:.3g} by iteration {s['rise_iteration']} and "
                   f"{ended}: the steps of {s['optimizer'] or 'the optimizer'}{rate} are too large for this "
                   "model." + (" Nothing raised before the NaN." if s.get("nonfinite_iteration") is not None else
                               " Nothing raised."))
        text = code_text(opt_loc)
        if lr is not None and text and f"lr={lr:g}" in text.replace(" ", ""):
            hint = (f"Lower the learning rate: write `lr={lr / 10:g}` in `{text}` at {index.where(opt_loc)}, or "
                    "clip the gradients (`clip_grad_norm_`) between backward and step.")
        else:
            hint = (f"Lower the learning rate{rate} of the optimizer"
                    f"{f' at {index.where(opt_loc)}' if opt_loc else ''} (ten times smaller first), or clip the "
                    "gradients (`clip_grad_norm_`) between backward and step.")
        location = opt_loc or backward
        out.add(LOSS_DIVERGING.code, message, hint, location,
                related=[r for r in [related("the loss that diverged", backward)] if r],
                details={"optimizer": s["optimizer"], "lr": lr, "min": s["min"], "rise_iteration":
                         s["rise_iteration"], "nonfinite_iteration": s.get("nonfinite_iteration")})
