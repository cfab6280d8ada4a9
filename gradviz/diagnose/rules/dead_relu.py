"""dead-relu (info): most units of a ReLU's output are zero for every example of the batch, on every full
iteration seen. Read from the ``training`` section's ``dead_relu``: on full iterations the adapter counts, for
each ReLU call, the units non-zero anywhere in the batch, with the layer that fed the ReLU."""

from ..records import related
from ..registry import Code, rule

MIN_ITERATIONS = 3  # full iterations a ReLU must be seen on, mostly dead on each

DEAD_RELU = Code(
    "dead-relu", "info", "most units of a ReLU output are zero for the whole batch, iteration after iteration",
    explanation="""\
A ReLU unit whose input is negative for every example outputs zero for the whole batch and passes back no
gradient: the weights feeding it get nothing from it and cannot move it back above zero. When most units of a
layer are dead the network trains on the few that are left (or on none): the loss falls a little and stops.
The usual causes are a learning rate large enough to push the pre-activations below zero in one step, or an
initialisation that starts them there (a large negative bias). Nothing raises.

gradviz counts, on the iterations it records in full, the units of each ReLU's output (`nn.ReLU`, `F.relu`,
`torch.relu`) that are non-zero for at least one example, and reports a ReLU with at least 90% of its units
dead on every one of at least three such iterations, at the ReLU's line, with the layer that feeds it. It is
information: a few dead units are normal, and a sparse layer can be meant.

The mistake:

    model = nn.Sequential(nn.Linear(10, 64), nn.ReLU(), nn.Linear(64, 3))
    nn.init.constant_(model[0].bias, -4.0)          # every unit starts dead
    optimizer = torch.optim.SGD(model.parameters(), lr=0.2)

The fix: start the units alive and keep them so: the default initialisation (or a zero bias), a lower
learning rate, or a ReLU that leaks a gradient:

    model = nn.Sequential(nn.Linear(10, 64), nn.LeakyReLU(0.01), nn.Linear(64, 3))
""")


@rule(DEAD_RELU)
def dead_relu(ctx, out):
    index = ctx.index
    for r in (ctx.doc.get("training") or {}).get("dead_relu") or ():
        if r["iterations"] < MIN_ITERATIONS or r["mostly_dead"] < r["calls"]:
            continue
        loc, feeder = r.get("location"), r.get("feeder") or {}
        relu = f"`{r['module']}` ({r['class']})" if r.get("module") and r.get("class") == "ReLU" else "the ReLU"
        fed = feeder.get("module") or feeder.get("op")
        fed_by = f", fed by `{fed}` ({feeder.get('class') or feeder.get('op')})" if fed else ""
        share = "all" if r["least_dead"] >= 1 else f"at least {r['least_dead']:.0%}"
        message = (f"{relu} at {index.where(loc)}{fed_by}: {share} of its {r['units']} units "
                   f"were zero for every example of the batch on each of the {r['iterations']} full iterations "
                   f"seen (iterations {r['first_iteration']} to {r['last_iteration']}). A dead unit passes back no "
                   "gradient, so nothing brings it back: the layer trains on the few units left. Nothing raises.")
        layer = f"`{fed}`" if feeder.get("module") else "the layer before it"
        hint = (f"Start the units alive and keep them so: {layer} with its default initialisation (or a zero "
                "bias), a lower learning rate, or `nn.LeakyReLU(0.01)` in place of the ReLU (dead units still get a "
                "gradient).")
        out.add(DEAD_RELU.code, message, hint, loc,
                related=[x for x in [related(f"{fed} feeds it" if fed else "the layer that feeds it",
                                             feeder.get("location"))] if x],
                details={"module": r.get("module"), "feeder": feeder.get("module"), "units": r["units"],
                         "least_dead": r["least_dead"], "iterations": r["iterations"]})
