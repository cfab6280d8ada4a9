"""loss-made-leaf: backward called on a loss that has no graph (computed with grad off, or from values cut from
the graph) after ``loss.requires_grad = True`` silenced PyTorch's "does not require grad" error: backward runs
and reaches no parameter. Read from the backward calls: every root a leaf that requires grad, no parameter
gradient written, while an optimizer steps."""

import re

from ...document.index import code_text
from ..records import related
from ..registry import Code, rule

LOSS_MADE_LEAF = Code(
    "loss-made-leaf", "warning", "backward on a loss with no graph, made to require grad: nothing learns",
    explanation="""\
`loss.backward()` ran on a loss that is a leaf: it has no `grad_fn`, because it was computed under
`torch.no_grad()`, from `.item()`/`.detach()`/numpy values, or rebuilt with `torch.tensor(value)`. PyTorch would
raise "element 0 of tensors does not require grad and does not have a grad_fn"; setting
`loss.requires_grad = True` (or `requires_grad_()`, or `torch.tensor(value, requires_grad=True)`) silences it.
Backward then writes a gradient into the loss itself and into nothing else: no parameter gets a gradient, the
optimizer's steps do nothing, and the model never learns. Nothing raises.

gradviz sees every backward's roots and the gradients it wrote: all roots leaves that require grad, no parameter
gradient, while an optimizer steps. It is reported at the backward's line, naming the loss.

The mistake:

    with torch.no_grad():
        scores = model(x)
    loss = F.cross_entropy(scores, y)
    loss.requires_grad = True      # "fixes" the error
    loss.backward()

The fix: compute the loss from the model's outputs with grad on, and drop the `requires_grad` line:

    scores = model(x)
    loss = F.cross_entropy(scores, y)
    loss.backward()
""")


@rule(LOSS_MADE_LEAF)
def loss_made_leaf(ctx, out):
    index = ctx.index
    if not any(e.get("event") == "step" for e in index.events_of("optimizer")):
        return  # no optimizer: a leaf's own gradient may be all the script wants
    for b in index.backwards:
        roots = b.get("roots") or []
        if b.get("error") or not b.get("started", True) or not roots or any(n is not None for n in
                                                                             b.get("root_nodes") or ()):
            continue
        variables = [index.variables.get(r) for r in roots]
        if any(v is None or not v.get("requires_grad_final", v.get("requires_grad")) and not v.get("requires_grad")
               or v.get("is_parameter") for v in variables):
            continue
        written = {int(k) for k in b.get("leaf_grad_norms") or {}} - set(roots)
        if written:
            continue
        loc = b.get("location")
        name = _name(index, roots[0], loc)
        message = (f"backward at {index.where(loc)} starts from `{name}`, a leaf: it has no graph (computed with "
                   "grad off, or from values cut from the graph) and was made to require grad, so backward "
                   "writes its gradient into it and into no parameter. The optimizer's steps change nothing; "
                   "nothing raises.")
        hint = (f"Compute `{name}` from the model's outputs with grad on (not under `torch.no_grad()`, not from "
                f"`.item()`/`.detach()` values) and delete the line that sets `{name}.requires_grad`.")
        out.add(LOSS_MADE_LEAF.code, message, hint, loc, variables=roots,
                related=[related(f"{name} made here", variables[0].get("location"))],
                details={"loss": name, "backward": b["id"]})


def _name(index, vid, loc):
    """The loss's name: the trace's, else the receiver of the backward call on its line (``loss.backward()``)."""
    name = index.var_name(vid)
    if re.fullmatch(r"v\d+", name):
        found = re.search(r"(\w+)\.backward\(", code_text(loc) or "")
        if found:
            return found.group(1)
    return name
