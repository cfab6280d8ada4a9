"""gan-fake-not-detached: one optimizer's loss (a discriminator's) backpropagates into the parameters of another
(the generator's), and those gradients are still there at that optimizer's step. Read from the ``training``
section's ``grad_leaks`` (the order of steps and zero_grad calls and the parameters' gradients, every
iteration); the line where the generator's output enters the other loss is found in a recorded graph."""

from ..records import related
from ..registry import Code, rule
from ..training_causes import detach_text, leak_crossing, optimizer_params, stepped_name

GAN_FAKE_NOT_DETACHED = Code(
    "gan-fake-not-detached", "warning",
    "the discriminator's loss backpropagates into the generator, whose step then applies those gradients",
    explanation="""\
The discriminator's loss reads the generator's output (`fake`) without `detach()`, so its backward also
writes gradients into the generator's parameters. When the generator's gradients are cleared before the
discriminator's backward (both `zero_grad()` calls at the top of the step) and not again before the
generator's step, the generator is updated with the sum of its own loss's gradient and the discriminator's:
the second pushes it to make its samples look *fake*. Nothing raises once `retain_graph=True` silenced the
"backward through the graph a second time" error; the generator just learns worse (a narrower, shifted
distribution). The same holds for any two optimizers whose losses share a graph (an actor's loss reading the
critic's value without detach).

gradviz follows every optimizer's `zero_grad()` and `step()` and the gradients they find: a step of one
optimizer after a backward that left gradients in another's parameters, then a second backward, then that
other optimizer's step with the gradients still there. It reports the line where the generator's output
enters the other loss (found in a recorded graph), with both steps as related lines.

The mistake:

    opt_d.zero_grad(); opt_g.zero_grad()
    fake = generator(z)
    d_loss = bce(discriminator(real), ones) + bce(discriminator(fake), zeros)
    d_loss.backward(retain_graph=True)
    opt_d.step()
    g_loss = bce(discriminator(fake), ones)
    g_loss.backward()
    opt_g.step()                      # applies g_loss's gradient plus d_loss's

The fix: detach the generator's output in the discriminator's loss (and drop retain_graph=True):

    d_loss = bce(discriminator(real), ones) + bce(discriminator(fake.detach()), zeros)

Not reported: one loss stepped by two optimizers (two parameter groups, each with its own optimizer), and a
generator whose gradients are cleared after the discriminator's backward (wasted work, but no harm).
""")


@rule(GAN_FAKE_NOT_DETACHED, order=60)
def gan_fake_not_detached(ctx, out):
    index = ctx.index
    params = optimizer_params(index)
    for leak in (index.doc.get("training") or {}).get("grad_leaks") or ():
        ours, theirs = (params.get(_key(leak.get(k))) or set() for k in ("built", "from_built"))
        step, giver = leak.get("location"), leak.get("from_location")
        found = leak_crossing(index, ours, theirs - ours, giver) if ours and theirs - ours else None
        if found is None:
            loc, name, fixed, backward = step, None, None, None
        else:
            backward, node, _, var = found
            loc = node.get("location")
            name, fixed = detach_text(index, node, var)
        what = f"`{name}`" if name else "the output of the parameters it steps"
        mine, other = (f"`{stepped_name(x)}`" if stepped_name(x) else f"the {leak[k]}"
                       for x, k in ((step, "optimizer"), (giver, "from_optimizer")))
        read = (f"The loss of {other} (stepped at {index.where(giver)}) reads {what} without "
                f"`detach()` at {index.where(loc)}" if found is not None else
                f"A loss whose backward ran before {other}'s step at {index.where(giver)} "
                "reached these parameters")
        message = (f"{read}: its backward wrote gradients into {leak['parameters']} parameter"
                   f"{'s' if leak['parameters'] != 1 else ''} of {mine}, stepped at "
                   f"{index.where(step)}, and no zero_grad() cleared them before that step, which applies them "
                   "with its own loss's: it is trained on the other loss too (from iteration "
                   f"{leak['iteration']}, {leak['count']} step{'s' if leak['count'] != 1 else ''}). Nothing raises.")
        if fixed:
            hint = (f"Detach it where the other loss reads it: `{fixed}` at {index.where(loc)} (and drop "
                    "retain_graph=True from that backward).")
        else:
            hint = ("Detach the generator's output where the discriminator's loss reads it "
                    "(`discriminator(fake.detach())`), or clear the generator's gradients just before its own "
                    "backward.")
        out.add(GAN_FAKE_NOT_DETACHED.code, message, hint, loc,
                related=[related("its backward wrote them here", backward and backward.get("location")),
                         related(f"{other.strip('`')} stepped here", giver),
                         related(f"{mine.strip('`')} applied them here", step)],
                details={"optimizer": leak["optimizer"], "from_optimizer": leak["from_optimizer"],
                         "parameters": leak["parameters"], "tensor": name, "iteration": leak["iteration"],
                         "steps": leak["count"]},
                order=(2, leak.get("order") or 0))


def _key(location):
    return (location or {}).get("file"), (location or {}).get("line")
