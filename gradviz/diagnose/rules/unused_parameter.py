"""unused-parameter: a parameter given to the optimizer that no recorded op ever used."""

from ..graph_rules import got_grad, optimized, succeeded, trainable
from ..records import related
from ..registry import Code, rule
from ..why import classify

UNUSED_PARAMETER = Code("unused-parameter", "warning",
                        "a parameter given to the optimizer never took part in the forward pass",
                        """\
A parameter handed to the optimizer never took part in any recorded operation, so it never gets a gradient
and the optimizer never changes it.

Usually a layer is created in `__init__` but not called in `forward`, or a branch of `forward` never runs.

The mistake:

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(4, 8)
            self.fc2 = nn.Linear(8, 1)        # never used below
        def forward(self, x):
            return self.fc1(x).sum(dim=1)

The fix: use the layer in forward, or delete it (or freeze it with `requires_grad_(False)` and leave it out
of the optimizer if it is kept on purpose).

A parameter frozen after it was created (`requires_grad = False` before training) is not reported, even if
it is still given to the optimizer: gradviz reads the parameters' `requires_grad` at the end of the trace.
Nor is a module that is never called and never given to an optimizer, such as the template layer that
`nn.TransformerEncoder(layer, num_layers)` copies: it is not part of the model being trained (the report's
summary counts its parameters apart). Registered as a submodule and given to the optimizer with
`model.parameters()`, the template is reported: it is trained by nothing.

In the picture: unused parameters are listed beside the graph, since they have no node in it.
""")


@rule(UNUSED_PARAMETER, order=34)
def unused_parameter(ctx, out):
    """Parameters handed to an optimizer that no recorded op ever used."""
    index = ctx.index
    done = succeeded(index)
    if not done:
        return
    opt = optimized(index)
    got = got_grad(index, done)
    unused = [vid for vid in trainable(index)
              if vid in opt and vid not in got and not index.var_consumers(vid)
              and index.variables[vid].get("accumulator") is None]
    steps = [e for e in index.events_of("optimizer") if e.get("event") == "step"]
    by_line = {}
    for vid in unused:
        loc = index.variables[vid].get("location") or {}
        by_line.setdefault((loc.get("file"), loc.get("line")), []).append(vid)
    for params in by_line.values():
        v = index.variables[params[0]]
        step = next((e for e in steps if params[0] in (e.get("parameters") or ())), None)
        names = ", ".join(index.var_label(p) for p in params)
        verb = "is" if len(params) == 1 else "are"
        message = (f"{names} {verb} given to the optimizer but no op ever used {'it' if len(params) == 1 else 'them'}"
                   ": no gradient, never trained.")
        hint = ("Use the layer in forward(), or remove it (or freeze it and leave it out of the optimizer if it is "
                "kept on purpose).")
        out.add("unused-parameter", message, hint, v.get("location"),
                related=[related("optimizer step here", step and step.get("location"))],
                variables=params, details={"parameters": params, "why_none": classify(index, params[0])},
                order=(2, params[0]))
