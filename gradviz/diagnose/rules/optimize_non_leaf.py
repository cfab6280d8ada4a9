"""optimize-non-leaf: an optimizer refused a Variable that is not a leaf ("can't optimize a non-leaf Tensor");
when it is a transformed copy of a tensor just created with requires_grad=True, the fix for its line."""

import re

from ...document.index import code_text, same_line
from ..backward_rules import script_exception
from ..fixes import leaf_fix_hint
from ..records import related
from ..registry import Code, rule
from ..why import created_leaf

OPTIMIZE_NON_LEAF = Code("optimize-non-leaf", "error", "an optimizer given a Variable that is not a leaf",
                         """\
An optimizer was given a Variable that is not a leaf and refused it ("can't optimize a non-leaf Tensor", a
ValueError in PyTorch and in gradviz alike).

An optimizer updates the `.grad` of each tensor it holds, and backward fills `.grad` only for leaves: tensors
you created, not results computed from them. The usual way to make a non-leaf by accident is to create a
tensor with requires_grad=True and transform it on the same line: the created tensor is the leaf (unnamed),
and the name holds the result.

The mistake:

    w = torch.randn(3, requires_grad=True) * 0.1     # w is MulBackward's output, not a leaf
    opt = torch.optim.SGD([w], lr=0.1)               # ValueError: can't optimize a non-leaf Tensor

(Read directly, `w.grad` is None after backward for the same reason: see `none-grad`.)

The fix: make the name hold the leaf. Transform first, then ask for gradients:

    w = (torch.randn(3) * 0.1).requires_grad_()

or create it with requires_grad=True and scale it in place where autograd does not record:

    w = torch.randn(3, requires_grad=True)
    with torch.no_grad():
        w.mul_(0.1)

gradviz writes the first fix for your own line when the line is a single assignment.

In the picture: the node that made the non-leaf.
""")


@rule(OPTIMIZE_NON_LEAF, order=42)
def optimize_non_leaf(ctx, out):
    index = ctx.index
    exc = script_exception(index, "optimize-non-leaf")
    if exc is None:
        return
    loc = exc.get("location")
    var = _named_non_leaf(index, code_text(loc))
    if var is None:
        message = (f"the optimizer at {index.where(loc)} was given a Variable that is not a leaf (can't optimize a "
                   "non-leaf Tensor): its `.grad` would always be None.")
        hint = ("Give the optimizer the tensors you created (parameters, or tensors made with requires_grad=True "
                "and not computed from anything), not results computed from them.")
        out.add("optimize-non-leaf", message, hint, loc, details={"exception": exc.get("type")}, order=(3, 0))
        return
    name = index.var_name(var["id"])
    created = created_leaf(index, var)
    head = (f"the optimizer at {index.where(loc)} was given `{name}`, which is not a leaf (can't optimize a "
            f"non-leaf Tensor): it is the output of {index.node_label(var.get('node'))} at "
            f"{index.where(var.get('location'))}")
    if created is not None:
        where = ("on the same line" if same_line(created.get("location"), var.get("location"))
                 else f"at {index.where(created.get('location'))}")
        message = (f"{head}, applied to a tensor created with requires_grad=True {where}. That tensor is the leaf "
                   f"backward would fill; `{name}.grad` would always be None.")
        hint = leaf_fix_hint(index, name, var.get("location"), created.get("location"))
    else:
        message = f"{head}; backward keeps no gradient for it, so its `.grad` would always be None."
        hint = (f"Give the optimizer the leaves `{name}` is computed from (parameters, tensors made with "
                "requires_grad=True), not the result.")
    out.add("optimize-non-leaf", message, hint, loc,
            related=[related("created here", var.get("location")),
                     related("leaf created here", created and created.get("location"))],
            nodes=[var.get("node")], variables=[var["id"], *([created["id"]] if created else [])],
            details={"exception": exc.get("type"), "leaf": created and created["id"]}, order=(3, 0))


def _named_non_leaf(index, text):
    """The last non-leaf Variable whose name appears on the optimizer's line (``SGD([w], lr=0.1)``), or None."""
    words = set(_WORD.findall(text))
    found = [v for v in index.variables.values() if v.get("node") is not None and index.var_name(v["id"]) in words]
    return max(found, key=lambda v: v["id"]) if found else None


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
