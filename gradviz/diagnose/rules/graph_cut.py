"""graph-cut: trainable parameters cut off from the loss by `.data`, `detach()` or a numpy round trip, grouped by
the cut; a cut bridged by hand (a second backward carries the gradient across) is an info."""

from ...document.index import same_line
from ..graph_rules import got_grad, succeeded, trained_here
from ..records import related
from ..registry import Code, rule
from ..why import classify, cut_downstream

GRAPH_CUT = Code("graph-cut", "warning", "parameters cut off from the loss by .data, detach() or a numpy round trip",
                 """\
Parameters that require grad got no gradient from backward because the graph between them and the loss was
cut: by `.data`, `detach()`, re-wrapping (`Variable(x.data, requires_grad=True)`), or a numpy round trip
(`torch.from_numpy(x.detach().numpy())`). Backward stops at the cut, so everything before it is not trained.

The mistake:

    h = model1(X)
    h = torch.from_numpy(h.detach().numpy())  # leaves the graph
    loss = criterion(model2(h), y)
    loss.backward()                           # model1 gets no gradient

The fix: keep the computation in Variables from the parameters to the loss; remove the cut:

    loss = criterion(model2(model1(X)), y)

When the cut is deliberate and the gradient is carried across by hand, gradviz reports it as an info and
draws two graphs bridged by hand. The seed's first version does this:

    y1 = model1(X)
    v = Variable(y1.data, requires_grad=True) # cut: v is a new leaf
    loss = criterion(model2(v), y)
    loss.backward()                           # stops at v
    y1.backward(v.grad)                       # carries v's gradient into model1

It works, but `Variable` is deprecated and one graph with one backward (`model2(model1(X))`) does the same
with less code and less memory.

Not reported: parameters that no optimizer is given, in a script that uses optimizers, such as a DQN's target
network (`target(s2).max(1)[0].detach()`, then updated by copying from the online network): it is not trained
by backward, so cutting it off is the point.

In the picture: the cut drawn as a dashed break between the two graphs.
""")

_CUT_WORDS = {"data": "`.data`", "detach": "`detach()`", "numpy": "a numpy round trip"}


@rule(GRAPH_CUT, order=32)
def graph_cut(ctx, out):
    """Trainable parameters that got no gradient because a cut separates them from every root, grouped by cut;
    and cuts bridged by hand (a second backward carries the gradient across), reported as an info."""
    index = ctx.index
    done = succeeded(index)
    bridged = _bridges(index, out, done)
    if not done:
        return
    got = got_grad(index, done)
    groups = {}
    for vid in trained_here(index):
        if vid in got:
            continue
        node = index.variables[vid].get("accumulator")
        if node is None:
            continue
        cut = cut_downstream(index, vid, node)
        if cut is None:
            continue
        source, how, loc = cut
        key = (source, how, (loc or {}).get("file"), (loc or {}).get("line"))
        groups.setdefault(key, (loc, []))[1].append(vid)
    for (source, how, _, _), (loc, params) in sorted(groups.items(), key=lambda kv: kv[1][1][0]):
        if (source, loc and loc.get("line")) in bridged:
            continue
        names = ", ".join(f"`{index.var_name(p)}`" for p in params[:6]) + (" …" if len(params) > 6 else "")
        last = done[-1]
        src = index.variables.get(source) or {}
        message = (f"{len(params)} parameter{'s' if len(params) != 1 else ''} requiring grad got no gradient "
                   f"({names}): {_CUT_WORDS.get(how, how)} at {index.where(loc)} cuts {index.var_label(source)} out of "
                   f"the graph, so backward at {index.where(last.get('location'))} stops there.")
        hint = (f"Keep the values in the graph from the parameters to the loss: remove the {_CUT_WORDS.get(how, how)}"
                " (use the Variable itself), or call backward on the part before the cut too.")
        why = classify(index, params[0])
        out.add("graph-cut", message, hint, loc,
                related=[related("cut value computed here", src.get("location")),
                         related("backward ran here", last.get("location"))],
                nodes=[src.get("node")] + [index.variables[p].get("accumulator") for p in params],
                variables=[*params, source], details={"parameters": params, "how": how, "why_none": why},
                order=(2, params[0]))


def _bridges(index, out, done):
    """Cuts whose gradient is carried across by hand: ``v = Variable(y1.data, requires_grad=True)`` then
    ``y1.backward(v.grad)``. Returns the set of ``(source, line)`` pairs reported."""
    found = set()
    for result, (source, how, loc) in sorted(index.cuts().items()):
        r = index.variables.get(result) or {}
        if not r.get("requires_grad"):
            continue
        for b in done:
            if source not in (b.get("roots") or ()):
                continue
            read = _gradient_read_of(index, b, result)
            if read is None:
                continue
            first = next((x for x in done if result in _leaves_of(x)), None)
            src = index.variables.get(source) or {}
            sname, rname = index.var_name(source), index.var_name(result)
            message = (f"Two graphs bridged by hand: {_CUT_WORDS.get(how, how)} at {index.where(loc)} makes "
                       f"`{rname}` a new leaf holding `{sname}`'s values; "
                       + (f"backward at {index.where(first.get('location'))} stops at `{rname}`, and " if first else "")
                       + f"`{sname}.backward({rname}.grad)` at {index.where(b.get('location'))} carries its gradient "
                       f"into the graph of `{sname}`. It works, but it is two graphs and two backward calls.")
            hint = (f"Use one graph: feed `{sname}` on directly (`model2({sname})`, or "
                    "`nn.Sequential(model1, model2)`) and call backward once on the loss.")
            out.add("graph-cut", message, hint, loc, severity="info",
                    related=[related("first backward (stops at the cut)", first and first.get("location")),
                             related("gradient carried across here", b.get("location"))],
                    nodes=[src.get("node"), r.get("accumulator")], variables=[source, result],
                    details={"bridged": True, "source": source, "result": result, "how": how,
                             "backwards": [x["id"] for x in (first, b) if x]},
                    order=(2, result))
            found.add((source, loc and loc.get("line")))
    return found


def _leaves_of(b):
    return {int(k) for k in (b.get("leaf_grad_norms") or {})}


def _gradient_read_of(index, b, result):
    read = index.events_by_id.get(b["gradient_from"]) if b.get("gradient_from") is not None else None
    if read is not None:
        return read if read.get("variable") == result else None
    for e in index.events_of("grad_read"):
        if e.get("variable") == result and not e.get("was_none") and same_line(e.get("location"),
                                                                                b.get("location")):
            return e
    return None
