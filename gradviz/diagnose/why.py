"""``why_none``: why a Variable has no gradient, classified, with the edge or line where the path breaks."""

import re

from ..document import DocIndex, is_accumulate_grad
from ..document.index import same_line

# cause -> what it means (docs/diagnostics.md's table is generated from this)
CAUSES = {
    "has-grad": "it has a gradient",
    "non-leaf": "an intermediate result without `retain_grad()`: backward passes its gradient on and drops it",
    "created-then-transformed": "the result of ops applied to a tensor just created with `requires_grad=True` "
                                "(`torch.randn(3, requires_grad=True) * 0.1`): that unnamed tensor is the leaf "
                                "that gets the gradient; `break.variable` names it, `break.edge` is the edge "
                                "into its accumulator",
    "unreachable": "nothing the backward went through was computed from it (or it was never used)",
    "cut": "`.data`, `detach()` or a numpy round trip separates it from the root; `break.how` says which, "
           "`break.location` where",
    "no-grad-mode": "computed under `no_grad()`",
    "volatile": "computed from a `volatile=True` input",
    "requires-grad-false": "a leaf that does not require grad (or was frozen when used)",
    "non-differentiable": "produced by argmax, a comparison or an integer cast",
    "other-iteration": "it belongs to another iteration's graph than the backward calls that ran",
}

_CUT_WORDS = {"data": "`.data`", "detach": "`detach()`", "numpy": "a numpy round trip"}


def why_none(doc, variable_id):
    """Classify the cause of ``variable_id``'s missing gradient in trace document ``doc``.

    Returns ``{"variable", "cause", "message", "location", "break"}``: ``cause`` is one of ``CAUSES``,
    ``location`` the line to look at, ``break`` where the path from the root to the Variable breaks
    (``{"kind", "location", "node", "variable", "edge", "how"}``; None when it has a gradient).
    """
    index = doc if isinstance(doc, DocIndex) else DocIndex(doc)
    return classify(index, variable_id)


def classify(index, vid):
    v = index.variables.get(vid)
    if v is None:
        known = f"v0…v{max(index.variables)}" if index.variables else "none"
        raise ValueError(f"no Variable v{vid} in this trace (Variables recorded: {known})")
    name = index.var_label(vid)
    if _has_grad(index, v):
        return _answer(vid, "has-grad", f"{name} has a gradient.", v.get("location"), None)
    if v.get("volatile"):
        return _answer(vid, "volatile",
                       f"{name} is volatile: it was computed from a Variable made with volatile=True, so no "
                       "graph was recorded for it and backward cannot reach it.",
                       v.get("location"), _brk("volatile", v.get("location"), variable=vid))
    if v.get("node") is not None:
        return _non_leaf(index, v, name)
    cut = index.cuts().get(vid)
    if cut is not None and not v.get("requires_grad"):
        return _cut_answer(index, v, name, cut, direct=True)
    if not v.get("requires_grad"):
        return _not_requiring(index, v, name)
    return _unreached_leaf(index, v, name)


def _has_grad(index, v):
    vid = v["id"]
    key = str(vid)
    for b in index.backwards:
        if b.get("error"):
            continue
        if key in (b.get("leaf_grad_norms") or {}):
            return True
    for e in index.events:
        if e.get("variable") != vid:
            continue
        if e.get("kind") == "grad_read" and not e.get("was_none"):
            return True
    return False


def _retains_grad(index, vid):
    for e in index.events:
        if e.get("variable") != vid:
            continue
        if e.get("kind") == "grad_read" and e.get("retains_grad"):
            return True
        if e.get("kind") == "hook" and e.get("retain_grad") and e.get("event") == "register":
            return True
    return False


def _non_leaf(index, v, name):
    vid = v["id"]
    node = v["node"]
    if not _retains_grad(index, vid):
        created = created_leaf(index, v)
        if created is not None:
            return _created_then_transformed(index, v, name, created)
        visited_by = _first_backward_through(index, node)
        through = (f"; backward at {index.where(visited_by['location'])} went through it and let its gradient pass "
                   "on to the leaves" if visited_by else "")
        return _answer(vid, "non-leaf",
                       f"{name} is not a leaf: it is the output of {index.node_label(node)} at "
                       f"{index.where(v.get('location'))}, and backward keeps gradients only for leaves unless "
                       f"retain_grad() is called before it{through}.",
                       v.get("location"), _brk("non-leaf", v.get("location"), node=node, variable=vid))
    return _unreached(index, v, name, node)


def created_leaf(index, v):
    """The leaf that non-leaf ``v`` is a transformed copy of, when ``v`` was computed from nothing but one tensor
    created with ``requires_grad=True`` by a constructor or factory on the same line (``w = torch.randn(3,
    requires_grad=True) * 0.1``) or on an earlier line that bound the same name (``w = w * 0.1``): that leaf,
    unnamed or shadowed, is what backward fills. None otherwise."""
    node = v.get("node")
    if node is None:
        return None
    leaves = {index.nodes[n].get("variable") for n in index.reachable_from([node])
              if n in index.nodes and is_accumulate_grad(index.nodes[n])}
    if len(leaves) != 1:
        return None
    leaf = index.variables.get(next(iter(leaves)))
    if leaf is None or leaf.get("origin") not in ("factory", "new") or not leaf.get("requires_grad") \
            or leaf.get("is_parameter") or leaf.get("name"):
        return None
    if same_line(leaf.get("location"), v.get("location")):
        return leaf
    bound = _ASSIGNED.match((leaf.get("location") or {}).get("text") or "")
    return leaf if bound and bound.group(1) == index.var_name(v["id"]) else None


_ASSIGNED = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.]*)\s*=[^=]")


def _created_then_transformed(index, v, name, leaf):
    vid = v["id"]
    loc = v.get("location")
    made = leaf.get("location")
    where = "on the same line" if same_line(made, loc) else f"at {index.where(made)}"
    return _answer(vid, "created-then-transformed",
                   f"{name} is not a leaf: it is the output of {index.node_label(v['node'])} at {index.where(loc)}, "
                   f"applied to a tensor created with requires_grad=True {where}. That tensor is the leaf that "
                   f"backward gives a gradient to; {name} is a new tensor computed from it, and backward keeps no "
                   "gradient for it.",
                   loc, _brk("created-then-transformed", loc, node=v["node"], variable=leaf["id"],
                             edge=[v["node"], leaf.get("accumulator")]))


def _first_backward_through(index, node):
    for b in index.backwards:
        if node in (b.get("visited") or ()):
            return b
    return None


def _not_requiring(index, v, name):
    vid = v["id"]
    loc = v.get("location")
    if v.get("origin") == "op":
        if not v.get("grad_mode", True):
            return _answer(vid, "no-grad-mode",
                           f"{name} was computed under no_grad() at {index.where(loc)}: no graph was recorded.",
                           loc, _brk("no-grad-mode", loc, variable=vid))
        if not _floating(v.get("dtype")):
            return _answer(vid, "non-differentiable",
                           f"{name} has dtype {v.get('dtype')}: it comes from a non-differentiable op (argmax, "
                           f"a comparison, an integer cast) at {index.where(loc)}, which records no graph.",
                           loc, _brk("non-differentiable", loc, variable=vid))
        return _answer(vid, "requires-grad-false",
                       f"{name} was computed at {index.where(loc)} from values none of which required grad, so it "
                       "does not require grad either.",
                       loc, _brk("requires-grad-false", loc, variable=vid))
    return _answer(vid, "requires-grad-false",
                   f"{name} was created at {index.where(loc)} with requires_grad=False; backward only fills .grad "
                   "for leaves that require grad.",
                   loc, _brk("requires-grad-false", loc, variable=vid))


def _floating(dtype):
    return bool(dtype) and (dtype.startswith("float") or dtype.startswith("complex") or dtype == "bfloat16")


def _cut_answer(index, v, name, cut, direct):
    source, how, loc = cut
    words = _CUT_WORDS.get(how, f"`{how}`")
    src_node = (index.variables.get(source) or {}).get("node")
    if direct:
        text = (f"{name} was cut out of the graph by {words} at {index.where(loc)}: it is a new leaf that shares "
                f"{index.var_label(source)}'s values but not its history.")
    else:
        text = (f"{name} got no gradient: the graph between it and the root is cut by {words} at {index.where(loc)}"
                f" ({index.var_label(source)} leaves the graph there), so backward stops at the cut.")
    return _answer(v["id"], "cut", text, loc,
                   _brk("cut", loc, node=src_node, variable=source, edge=[src_node, None], how=how))


def _unreached_leaf(index, v, name):
    vid = v["id"]
    uses = index.var_consumers(vid)
    node = v.get("accumulator")
    if uses and node is None and all(_edge_at(index, n, i) is None for n, i in uses):
        first = index.nodes[uses[0][0]]
        return _answer(vid, "requires-grad-false",
                       f"{name} did not require grad when it was used by {index.node_label(first['id'])} at "
                       f"{index.where(first.get('location'))} (it was frozen), so no gradient flows to it.",
                       first.get("location"), _brk("requires-grad-false", first.get("location"), node=first["id"],
                                                   variable=vid))
    if node is None and not uses:
        return _answer(vid, "unreachable",
                       f"{name} was never used by an op that recorded a graph, so no backward can reach it.",
                       v.get("location"), _brk("unused", v.get("location"), variable=vid))
    return _unreached(index, v, name, node)


def _edge_at(index, node_id, i):
    inputs = index.nodes[node_id].get("inputs") or ()
    edge = inputs[i] if i < len(inputs) else None
    return edge[0] if edge else None


def _unreached(index, v, name, node):
    """The Variable is in a graph but got nothing: find a cut after it, another iteration, or no path."""
    vid = v["id"]
    cut = cut_downstream(index, vid, node)
    if cut is not None:
        return _cut_answer(index, v, name, cut, direct=False)
    done = [b for b in index.backwards if not b.get("error")]
    if not done:
        return _answer(vid, "unreachable", f"{name} got no gradient: no backward completed in this trace.",
                       v.get("location"), _brk("no-backward", v.get("location"), node=node, variable=vid))
    own = _iterations_of(index, index.downstream(node) if node is not None else ())
    ran = {b.get("iteration") for b in done}
    if own and not own & ran:
        last = done[-1]
        return _answer(vid, "other-iteration",
                       f"{name} belongs to the graph of iteration {min(own)}, but backward ran on other "
                       f"iterations' graphs (the last at {index.where(last.get('location'))}, iteration "
                       f"{last.get('iteration')}): it is a value from another iteration.",
                       v.get("location"), _brk("other-iteration", v.get("location"), node=node, variable=vid))
    last = done[-1]
    roots = ", ".join(index.var_name(r) for r in last.get("roots") or ()) or "the root"
    return _answer(vid, "unreachable",
                   f"{name} is not reachable from {roots}: nothing backward at {index.where(last.get('location'))} "
                   "went through was computed from it.",
                   last.get("location"),
                   _brk("unreachable", last.get("location"), node=node, variable=vid,
                        edge=[(last.get("root_nodes") or [None])[0], node]))


def cut_downstream(index, vid, node):
    """The cut (``(source, how, location)``) through which ``vid``'s values left the graph, or None.
    Prefers a cut whose result was used afterwards over one that only fed a print or a metric."""
    produced = {vid}
    if node is not None:
        for nid in index.downstream(node):
            produced.update((index.nodes.get(nid) or {}).get("outputs") or ())
    best = None
    for result, (source, how, loc) in sorted(index.cuts().items()):
        if source in produced and how in _CUT_WORDS:
            used = bool(index.var_consumers(result))
            if used:
                return source, how, loc
            best = best or (source, how, loc)
    if best is not None:
        return best
    for e in index.events_of("detach"):
        if e.get("source") in produced and e.get("how") in _CUT_WORDS:
            return e["source"], e["how"], e.get("location")
    return None


def _iterations_of(index, node_ids):
    found = set()
    for nid in node_ids:
        node = index.nodes.get(nid) or {}
        if is_accumulate_grad(node):
            continue
        if node.get("iteration") is not None:
            found.add(node["iteration"])
            continue
        graph = index.graphs.get(node.get("graph"))
        if graph is not None and graph.get("iteration") is not None:
            found.add(graph["iteration"])
    return found


def _brk(kind, location, node=None, variable=None, edge=None, how=None):
    return {"kind": kind, "location": location, "node": node, "variable": variable, "edge": edge, "how": how}


def _answer(vid, cause, message, location, brk):
    return {"variable": vid, "cause": cause, "message": message, "location": location, "break": brk}
