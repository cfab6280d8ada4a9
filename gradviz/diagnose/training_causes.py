"""The two silent wiring mistakes behind most "backward through the graph a second time" errors and most graphs
kept by ``retain_graph=True``: a recurrent state carried across iterations without ``detach()`` (the ``training``
section's ``hidden_state_carries``) and a generator's output read by the discriminator's loss without
``detach()`` (found in the graph: a backward that writes the gradients of two optimizers' parameters). The rules
of those codes and the hints of ``graph-freed``, ``stale-version`` and ``retained-graph`` read them here, so
each says the same cause, tensor and one-line fix."""

import re

from ..document import is_accumulate_grad
from ..document.index import code_text
from .records import related

RECURRENT_PAIRS = ("LSTM", "LSTMCell")  # their state is a tuple (h, c)


def carries(index):
    return list((index.doc.get("training") or {}).get("hidden_state_carries") or ())


def detach_line(carry):
    """The line that cuts the carried state from the graph it came from."""
    name = carry.get("argument") or "hidden"
    if carry.get("class") in RECURRENT_PAIRS:
        return f"{name} = tuple(h.detach() for h in {name})"
    return f"{name} = {name}.detach()"


def carry_cause(index, carry):
    """(the sentence naming the carried state, the hint writing its fix, its related line)."""
    name = carry.get("argument")
    what = f"`{name}`" if name else "the hidden state"
    sentence = (f"{what} is fed back into `{carry.get('module')}` ({carry.get('class')}) at "
                f"{index.where(carry.get('location'))} still attached to the graph of iteration "
                f"{carry.get('made_iteration')}, which a backward already went through: without `detach()`, each "
                "backward goes back through every earlier iteration.")
    hint = (f"Detach the carried state before the call: write `{detach_line(carry)}` before "
            f"{index.where(carry.get('location'))} (truncated backpropagation through time: each backward stops at "
            "the batch boundary). retain_graph=True is not the fix: it keeps every iteration's graph alive.")
    return sentence, hint, related(f"{name or 'hidden state'} carried here without detach()", carry.get("location"))


def _reach(index, node_ids, theirs, ours):
    """``{node id: (reaches theirs, reaches ours)}`` over ``node_ids``, inputs first (a depth-first post-order,
    without recursion: node ids do not follow the graph's order)."""
    inside = set(node_ids)
    reach = {}
    for start in node_ids:
        stack = [(start, False)]
        while stack:
            nid, ready = stack.pop()
            if nid in reach:
                continue
            node = index.nodes.get(nid) or {}
            edges = [e[0] for e in node.get("inputs") or () if e and e[0] in inside]
            if is_accumulate_grad(node):
                var = node.get("variable")
                reach[nid] = (var in theirs, var in ours)
            elif ready:
                reach[nid] = (any(reach.get(e, (False, False))[0] for e in edges),
                              any(reach.get(e, (False, False))[1] for e in edges))
            else:
                stack.append((nid, True))
                stack.extend((e, False) for e in edges if e not in reach)
    return reach


def optimizer_params(index):
    """``{construction line: set of parameter variable ids}`` over the optimizers built."""
    found = {}
    for o in (index.doc.get("training") or {}).get("optimizers") or ():
        key = _key(o.get("location"))
        found.setdefault(key, set()).update(v for group in o.get("param_groups") or () for v in group)
    return found


def _key(location):
    return (location or {}).get("file"), (location or {}).get("line")


def crossing(index, backward, theirs, ours):
    """Where ``backward``'s graph, which writes gradients of parameters ``ours``, reads a tensor computed from
    parameters ``theirs`` (variable id sets): ``(node, input node, variable id of that input)`` for the first
    node (lowest id) that combines the two, or None when the backward reaches only one side."""
    visited = sorted(set(backward.get("visited") or ()))
    reach = _reach(index, visited, theirs, ours)
    for nid in visited:
        if reach[nid] != (True, True):
            continue
        node = index.nodes.get(nid) or {}
        edges = [e for e in node.get("inputs") or () if e and e[0] in reach]
        if any(reach[e[0]] == (True, True) for e in edges):
            continue  # not the first to combine them
        source = next((e for e in edges if reach[e[0]] == (True, False)), None)
        if source is None:
            return None
        outputs = (index.nodes.get(source[0]) or {}).get("outputs") or ()
        var = outputs[source[1]] if len(outputs) > source[1] else None
        return node, index.nodes.get(source[0]), var
    return None


def leak_crossing(index, receiver_params, giver_params, giver_step):
    """The first recorded backward whose next optimizer step is the giver's (at ``giver_step``: the giver's loss,
    not the receiver's, whose graph reads the giver's parameters as well) and that writes gradients of both
    optimizers' parameters, and where its graph reads the receiver's output: ``(backward, node, source,
    variable)``, or None."""
    steps = _steps(index)
    for b in index.backwards:
        if b.get("error") or _next_step(steps, b) != _key(giver_step):
            continue
        written = {int(k) for k in b.get("leaf_grad_norms") or {}}
        if written & receiver_params and written & giver_params:
            found = crossing(index, b, receiver_params, giver_params)
            if found is not None:
                return (b, *found)
    return None


def _steps(index):
    return sorted((e.get("seq") or 0, _key(e.get("location"))) for e in index.events_of("optimizer")
                  if e.get("event") == "step")


def _next_step(steps, backward):
    """The line of the first optimizer step after ``backward``, or None."""
    return next((key for seq, key in steps if seq > (backward.get("seq") or 0)), None)


def leaking(index, backward):
    """Whether ``backward`` is the one whose gradients another optimizer's step applied (a ``grad_leaks`` entry:
    the next step after it is the giver's): its retain_graph=True is that mistake's, reported there."""
    givers = {_key(leak.get("from_location")) for leak in (index.doc.get("training") or {}).get("grad_leaks") or ()}
    return bool(givers) and _next_step(_steps(index), backward) in givers


def detach_text(index, node, var):
    """The tensor's name and the call to write with ``.detach()`` (``discriminator(fake)`` →
    ``discriminator(fake.detach())``), from the node's line; either is None when not known."""
    name = index.var_name(var) if var is not None else None
    if name and re.fullmatch(r"v\d+", name):
        name = None  # (no name the user gave it)
    text = code_text(node.get("location")) if node else None
    call = re.search(rf"([\w.]+)\(\s*{re.escape(name)}\s*\)", text) if name and text else None
    return name, call and f"{call.group(1)}({name}.detach())"


def stepped_name(location):
    """``opt_g`` from the line ``opt_g.step()``, else None."""
    found = re.search(r"([\w.]+)\.step\(", code_text(location) or "")
    return found and found.group(1)


def carry_before(index, iteration):
    """The first carried state at or before ``iteration`` (None: unknown iteration, any)."""
    for c in carries(index):
        if iteration is None or (c.get("iteration") or 0) <= iteration:
            return c
    return None


def shared_graph(index, first, nodes):
    """A backward (``first``) that went into another optimizer's graph: of the optimizers whose parameters
    ``first`` wrote, the one whose parameters lie below ``nodes`` (the graph it freed or kept) is "theirs"; the
    crossing found in ``first``'s graph (``crossing``), or None."""
    if first is None:
        return None
    written = {int(k) for k in first.get("leaf_grad_norms") or {}}
    below = {(index.nodes.get(n) or {}).get("variable") for n in index.reachable_from(nodes)
             if is_accumulate_grad(index.nodes.get(n))}
    sets = [p for p in optimizer_params(index).values() if p & written]
    theirs = next((p for p in sets if p & below), None)
    ours = set().union(*(p for p in sets if p is not theirs and not p & below)) - (theirs or set())
    if theirs is None or not ours:
        return None
    return crossing(index, first, theirs, ours)
