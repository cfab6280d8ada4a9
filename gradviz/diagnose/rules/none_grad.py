"""none-grad: a non-leaf Variable's `.grad` read as None (the seed's ``y1.backward(y1.grad)``)."""

from ...document.index import same_line
from ..fixes import leaf_fix_hint
from ..records import related
from ..registry import Code, rule
from ..why import classify

NONE_GRAD = Code("none-grad", "warning", "`.grad` of a non-leaf Variable read as None", """\
A non-leaf Variable's `.grad` was read and it was None.

Backward computes the gradient of every Variable in the graph, but it only *keeps* it for leaves (Variables
you created yourself with requires_grad=True, such as parameters). An intermediate result such as a model's
output is not a leaf: its gradient flows through it and is then dropped, so its `.grad` stays None. PyTorch
warns about this too ("The .grad attribute of a Tensor that is not a leaf Tensor is being accessed").

The mistake (the seed question: passing that None on to a second backward):

    y1 = model1(X)
    y2 = model2(y1)
    loss = criterion(y2, y)
    loss.backward()
    y1.backward(y1.grad)     # y1.grad is None: y1 is not a leaf

The fix: most of the time you do not need the intermediate gradient at all. Chain the models and call
backward once; the gradient reaches model1's parameters through y1 by itself:

    model = nn.Sequential(model1, model2)      # or: y2 = model2(model1(X))
    loss = criterion(model(X), y)
    loss.backward()

If you do need to see the gradient of an intermediate result, ask for it before backward:

    y1.retain_grad()                           # keep y1.grad after backward
    loss.backward()
    print(y1.grad)

or observe it without keeping it: `y1.register_hook(lambda g: print(g.norm()))`.

A sharper case: a tensor created with requires_grad=True and transformed on the same line is not a leaf
either. The created tensor is the leaf and gets the gradient, but nothing names it:

    w = torch.randn(3, requires_grad=True) * 0.1     # w is MulBackward's output
    (w * x).sum().backward()
    print(w.grad)                                    # None

gradviz says so and writes the fix for your line: transform first, then ask for gradients
(`w = (torch.randn(3) * 0.1).requires_grad_()`), or create it, then scale it under `torch.no_grad()`
(`with torch.no_grad(): w.mul_(0.1)`). An optimizer given such a `w` refuses it (`optimize-non-leaf`).

In the picture: the Variable whose `.grad` was read is outlined in the diagnostic's colour.
""")


@rule(NONE_GRAD, order=10)
def none_grad(ctx, out):
    """Non-leaf `.grad` reads that returned None. Leaves ``{event id: diagnostic key}`` in
    ``ctx.shared["none_grad"]``: nonscalar-backward links a backward given that None to the read."""
    index = ctx.index
    keys = ctx.shared["none_grad"] = {}
    for e in index.events_of("grad_read"):
        if not e.get("was_none") or e.get("is_leaf") or e.get("retains_grad"):
            continue
        vid = e.get("variable")
        v = index.variables.get(vid) or {}
        why = classify(index, vid) if vid in index.variables else None
        node = v.get("node")
        backward = _backward_through(index, node)
        name = index.var_name(vid)
        if backward is not None:
            after = f"backward at {index.where(backward.get('location'))} went through it but kept no gradient"
        else:
            after = "backward never keeps a non-leaf's gradient"
        if why is not None and why["cause"] == "created-then-transformed":
            message, hint = _created_then_transformed(index, v, name, why, backward)
        else:
            message = (f"`{name}.grad` is None: {index.var_label(vid)} is not a leaf (it is the output of "
                       f"{index.node_label(node)} at {index.where(v.get('location'))}), and {after}.")
            hint = (f"Chain the models and call backward once on the loss — the gradient reaches everything "
                    f"before `{name}` by itself; to inspect it, call `{name}.retain_grad()` before backward or use "
                    f"`{name}.register_hook(...)`.")
        keys[e["id"]] = out.add(
            "none-grad", message, hint, e.get("location"),
            related=[related("created here", v.get("location")),
                     related("backward ran here", backward and backward.get("location"))],
            nodes=[node], variables=[vid], details={"event": e["id"], "why_none": why}, order=(0, e["id"]))


def _created_then_transformed(index, v, name, why, backward):
    """none-grad's message and hint when the None-read Variable is a transformed copy of a tensor just created
    with requires_grad=True (``w = torch.randn(3, requires_grad=True) * 0.1``)."""
    leaf = index.variables.get(why["break"]["variable"]) or {}
    made = leaf.get("location")
    if same_line(made, v.get("location")):
        where, that = "on the same line", "that unnamed tensor"
    else:
        where, that = f"at {index.where(made)}", f"that tensor (the name `{name}` now holds the result)"
    filled = (f"backward at {index.where(backward.get('location'))} put the gradient there"
              if backward is not None else "backward puts the gradient there")
    message = (f"`{name}.grad` is None: {index.var_label(v['id'])} is not a leaf. It is the output of "
               f"{index.node_label(v.get('node'))} at {index.where(v.get('location'))}, applied to a tensor created "
               f"with requires_grad=True {where}: {that} is the leaf, {filled}, and `{name}` keeps "
               "none (an optimizer given it refuses it: can't optimize a non-leaf Tensor).")
    return message, leaf_fix_hint(index, name, v.get("location"), made)


def _backward_through(index, node):
    for b in index.backwards:
        if node is not None and node in (b.get("visited") or ()):
            return b
    return None
