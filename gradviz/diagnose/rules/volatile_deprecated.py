"""volatile-deprecated: ``Variable(..., volatile=True)``, removed in PyTorch 0.4."""

from ..registry import Code, rule

VOLATILE_DEPRECATED = Code("volatile-deprecated", "warning",
                           "`volatile=True` is deprecated and has no effect in PyTorch",
                           """\
`Variable(..., volatile=True)` was used. `volatile` was removed in PyTorch 0.4: it has no effect there
(PyTorch warns "volatile was removed and now has no effect. Use `with torch.no_grad():` instead.").

gradviz still honours it the old way (the output of any op with a volatile input is volatile and records no
graph), so old scripts such as the seed's autograd notes run, but code relying on it silently builds graphs in
current PyTorch and wastes memory.

The mistake:

    x = Variable(torch.randn(5, 5), volatile=True)
    out = model(x)                            # inference

The fix:

    with torch.no_grad():
        out = model(torch.randn(5, 5))

In the picture: the volatile Variable.
""")


@rule(VOLATILE_DEPRECATED, order=50)
def volatile_deprecated(ctx, out):
    index = ctx.index
    for v in sorted(index.variables.values(), key=lambda v: v["id"]):
        if not v.get("volatile") or v.get("origin") not in ("new", "factory"):
            continue
        message = (f"{index.var_label(v['id'])} is created with volatile=True: volatile was removed in PyTorch "
                   "0.4 and has no effect there (gradviz still honours it: nothing computed from it records a "
                   "graph).")
        hint = "Run inference inside `with torch.no_grad():` instead of marking inputs volatile."
        out.add("volatile-deprecated", message, hint, v.get("location"), variables=[v["id"]],
                details={"variable": v["id"]}, order=(2, v["id"]))
