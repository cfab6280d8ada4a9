"""Rules about which parameters the graph connects to the loss (graph-cut, unused-parameter) and about graphs
kept alive after backward (retained-graph)."""

from ..document import is_accumulate_grad
from ..document.index import code_text, same_line
from .records import related
from .why import classify, cut_downstream

_CUT_WORDS = {"data": "`.data`", "detach": "`detach()`", "numpy": "a numpy round trip"}


def _succeeded(index):
    return [b for b in index.backwards if not b.get("error")]


def _got_grad(index, done):
    got = set()
    for b in done:
        got.update(int(k) for k in (b.get("leaf_grad_norms") or {}))
        visited = set(b.get("visited") or ())
        for v in index.variables.values():
            if v.get("accumulator") in visited:
                got.add(v["id"])
    return got


def _optimized(index):
    params = set()
    for e in index.events_of("optimizer"):
        params.update(e.get("parameters") or ())
    return params


def _trainable(index):
    """Leaves meant to be trained: parameters, and any Variable handed to an optimizer, that require grad when
    first seen and still did at the end (a layer frozen later is not meant to train, optimizer or not)."""
    opt = _optimized(index)
    return sorted(vid for vid, v in index.variables.items()
                  if v.get("is_leaf", True) and v.get("node") is None and v.get("requires_grad")
                  and v.get("requires_grad_final") is not False and (v.get("is_parameter") or vid in opt))


def _trained_here(index):
    """The trainable leaves this script trains: those given to an optimizer when it uses one (a DQN's target
    network, detached from the loss on purpose and updated by copying, is a model but not trained here), every
    trainable leaf when it uses none (parameters updated by hand)."""
    opt = _optimized(index)
    return [vid for vid in _trainable(index) if not opt or vid in opt]


def graph_cuts(index, out):
    """Trainable parameters that got no gradient because a cut separates them from every root, grouped by cut;
    and cuts bridged by hand (a second backward carries the gradient across), reported as an info."""
    done = _succeeded(index)
    bridged = _bridges(index, out, done)
    if not done:
        return
    got = _got_grad(index, done)
    groups = {}
    for vid in _trained_here(index):
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


def unused_parameters(index, out):
    """Parameters handed to an optimizer that no recorded op ever used."""
    done = _succeeded(index)
    if not done:
        return
    opt = _optimized(index)
    got = _got_grad(index, done)
    unused = [vid for vid in _trainable(index)
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


# ----- retained graphs ------------------------------------------------------------------------------------
def retained_graphs(index, out):
    memory = index.doc.get("memory") or {}
    series = list(memory.get("series") or [])
    if len(series) > 3 and (series[-1].get("graphs_alive") or 0) < (series[-2].get("graphs_alive") or 0):
        series.pop()  # the point taken at stop, after the script's own variables were released
    growth = ((index.doc.get("schedule") or {}).get("light") or {}).get("growth")
    if isinstance(growth, dict) and isinstance(growth.get("iteration"), int):
        # a light iteration saw graphs begin to pile up late in the run: the trend is judged from there
        tail = [s for s in series if (s.get("iteration") or 0) >= growth["iteration"] - 1]
        if growing([int(s.get("graphs_alive") or 0) for s in tail]):
            series = tail
    else:
        series = _from_last_low(series)
    bytes_series = [int(s.get("retained_bytes") or 0) for s in series]
    alive_series = [int(s.get("graphs_alive") or 0) for s in series]
    growing_bytes = growing(bytes_series)
    keepers = _keepers(index)
    # a line chaining each iteration's graph to the next, with one more graph alive after every iteration: a
    # trend from the third iteration on (a short run, Lightning's max_steps=3), where numbers alone need four
    growing_graphs = growing(alive_series) or bool(keepers) and _climbs(alive_series)
    retainers = _retaining_backwards(index)
    if not (growing_bytes or growing_graphs):
        final = memory.get("final_retained_bytes") or (bytes_series[-1] if bytes_series else 0)
        retainers = [b for b in retainers if not _shared_by_a_second_loss(index, b)]
        if final and retainers:
            _report_retained(index, out, memory, series, keepers, retainers, growing_=False)
        return
    _report_retained(index, out, memory, series, keepers, retainers, growing_=True)


def _from_last_low(series):
    """The series from the last point where the graphs alive were at their lowest, when the graphs pile up from
    there (``history.append(loss)`` from iteration 40 on): judged over the whole run, the flat start hides it."""
    alive = [int(s.get("graphs_alive") or 0) for s in series]
    if len(alive) < 4:
        return series
    low = min(alive)
    start = max(i for i, a in enumerate(alive) if a == low)
    tail = series[start:]
    return tail if len(tail) >= 4 and growing(alive[start:]) else series


def growing(values):
    """True when a per-iteration series keeps climbing: split in thirds, each third's lowest and highest values
    are above the previous third's, and it ends above where it started. A series that rises once and then
    repeats a pattern (several backward calls per loop, each a tracer iteration: a GAN's three) is not
    growing, however the pattern goes up and down."""
    n = len(values)
    if n < 4 or values[-1] <= values[0]:  # three points are one warm-up and a step: too few to call a trend
        return False
    first, middle, last = values[:n // 3], values[n // 3:n - n // 3], values[n - n // 3:]
    return (min(first) < min(middle) < min(last)) and (max(first) < max(middle) < max(last))


def _climbs(values):
    """Three or more values, each above the one before."""
    return len(values) >= 3 and all(b > a for a, b in zip(values, values[1:]))


def _keepers(index):
    """Nodes with an input from an earlier iteration's graph: the line that chains iterations together
    (``total_loss += loss``). Returns ``[(location, node ids)]`` in order of first appearance.

    An input whose graph was freed by the same backward that freed the node reading it is not a chain: that graph
    was kept only until the backward that used it (a GAN's generator step reads the ``fake`` built for the
    discriminator's step, and its backward frees both)."""
    freed = _freed_by_table(index)
    found = {}
    for n in sorted(index.nodes.values(), key=lambda n: n["id"]):
        it = _iteration(index, n)
        if it is None or is_accumulate_grad(n):
            continue
        for edge in n.get("inputs") or ():
            if not edge or edge[0] is None:
                continue
            src = index.nodes.get(edge[0]) or {}
            if is_accumulate_grad(src):
                continue
            src_it = _iteration(index, src)
            if src_it is not None and src_it < it and not _used_up_together(freed, n, src):
                loc = n.get("location")
                key = (loc or {}).get("file"), (loc or {}).get("line")
                found.setdefault(key, (loc, []))[1].append(n["id"])
                break
    # a node built on a light iteration has no line: the chain's line is the first one a full iteration saw
    return sorted(found.values(), key=lambda entry: entry[0] is None)


def _freed_by_table(index):
    """``{node id: backward id}``: the backward (without retain_graph) that freed each node, or, for a node that
    saved nothing to free, the first such backward that ran it."""
    table = {}
    for b in index.backwards:
        if b.get("retain_graph") or b.get("error"):
            continue
        for nid in b.get("visited") or ():
            table.setdefault(nid, b.get("id"))
    for n in index.nodes.values():
        if n.get("freed_by") is not None:
            table[n["id"]] = n["freed_by"]
    return table


def _used_up_together(freed, node, src):
    done = freed.get(src.get("id"))
    return done is not None and done == freed.get(node.get("id"))


def _iteration(index, node):
    if node.get("iteration") is not None:
        return node["iteration"]
    graph = index.graphs.get(node.get("graph"))
    return graph.get("iteration") if graph else None


def _retaining_backwards(index):
    """Backward calls with retain_graph=True whose graph is still alive at the end (or was never freed)."""
    result = []
    for b in index.backwards:
        if not b.get("retain_graph") or b.get("error"):
            continue
        graphs = {(index.nodes.get(n) or {}).get("graph") for n in b.get("root_nodes") or ()}
        alive = any((index.graphs.get(g) or {}).get("alive_at_end", True) for g in graphs if g is not None)
        if alive or not graphs:
            result.append(b)
    return result


def _report_retained(index, out, memory, series, keepers, retainers, growing_):
    first_bytes = int(series[0].get("retained_bytes") or 0) if series else 0
    last = series[-1] if series else {}
    last_bytes = int(last.get("retained_bytes") or 0)
    alive = int(last.get("graphs_alive") or 0)
    parts = []
    first_alive = int(series[0].get("graphs_alive") or 0) if series else 0
    span = f"after iteration {series[0].get('iteration')} → " if series else ""
    if growing_ and growing([int(s.get("retained_bytes") or 0) for s in series]):
        parts.append(f"Memory held by finished graphs grows every iteration: {_fmt(first_bytes)} {span}"
                     f"{_fmt(last_bytes)} after iteration {last.get('iteration')}, with {alive} graphs alive.")
    elif growing_:
        parts.append(f"Finished graphs are never freed: {first_alive} graph(s) alive {span}{alive} after "
                     f"iteration {last.get('iteration')} (their saved buffers were freed by backward; their nodes "
                     "and outputs stay).")
    else:
        parts.append(f"{_fmt(memory.get('final_retained_bytes') or last_bytes)} of saved buffers are held by "
                     "graphs that backward has finished with.")
    if keepers:
        loc, _ = keepers[0]
        parts.append(f"`{code_text(loc) or 'the line'}` at {index.where(loc)} chains each iteration's graph "
                     "to the next, keeping them all alive.")
    if retainers:
        parts.append(f"backward(retain_graph=True) at {index.where(retainers[0].get('location'))} keeps each graph's "
                     "saved buffers after backward.")
    twice = _backward_twice(index, retainers)
    if twice is not None:
        second, params = twice
        names = ", ".join(f"`{index.var_name(p)}`" for p in params[:4]) + (" …" if len(params) > 4 else "")
        parts.append(f"Also, backward at {index.where(second.get('location'))} goes back through nodes the "
                     f"retained backward already went through, adding {names}'s gradient a second time.")
    hooks = [e for e in index.events_of("hook") if e.get("event") == "register" and not e.get("retain_grad")]
    if hooks and retainers:
        parts.append(f"The hook registered at {index.where(hooks[0].get('location'))} holds a Variable of the graph.")
    holders = [h for h in memory.get("holders") or () if h.get("location")]
    if holders and not keepers:
        h = holders[0]
        parts.append(f"`{h['name']}` holds {h['count']} of their outputs (added at {index.where(h['location'])}), "
                     "and each output keeps its whole graph alive.")
    location = (keepers[0][0] if keepers else holders[0]["location"] if holders
                else retainers[0].get("location") if retainers else _first_alive_root(index))
    hint = ("Accumulate plain numbers (`total += loss.item()`), don't keep outputs or losses across iterations, "
            "and call backward without retain_graph=True (chain the models and backward once instead).")
    nodes = [n for _, ids in keepers for n in ids]
    for b in retainers:
        nodes.extend(b.get("root_nodes") or ())
    out.add("retained-graph", " ".join(parts), hint, location, severity=None if growing_ else "info",
            related=[related("retain_graph=True here", retainers[0].get("location")) if retainers else None,
                     related("hook registered here", hooks[0].get("location")) if hooks else None],
            nodes=nodes,
            details={"growing": growing_, "series": [[s.get("iteration"), s.get("retained_bytes"),
                                                      s.get("graphs_alive")] for s in series[-200:]],
                     "peak_retained_bytes": memory.get("peak_retained_bytes"),
                     "final_retained_bytes": memory.get("final_retained_bytes"),
                     "keepers": [loc for loc, _ in keepers]},
            order=(2, 0))


def _later_backwards(index, first):
    """Backward calls after ``first`` in the same iteration, and the non-leaf nodes ``first`` ran."""
    ran = {n for n in first.get("visited") or () if not is_accumulate_grad(index.nodes.get(n))}
    later = [b for b in index.backwards
             if b is not first and not b.get("error") and b.get("iteration") == first.get("iteration")
             and b.get("id", 0) > first.get("id", 0)]
    return ran, later


def _shared_by_a_second_loss(index, first):
    """``loss1.backward(retain_graph=True); loss2.backward()`` on two losses over a shared trunk: the second
    backward starts from its own loss (a root the first never ran) and goes back through the trunk, which is why
    the first had to keep it. What stays after that is one step's heads, freed with the next step's graph."""
    ran, later = _later_backwards(index, first)
    return any(ran & set(b.get("visited") or ()) and not ran & set(b.get("root_nodes") or ()) for b in later)


def _backward_twice(index, retainers):
    """A later backward in the same iteration that starts inside the graph a retain_graph=True backward ran
    (``y1.backward(y1.grad)`` after ``loss.backward(retain_graph=True)``), and the leaves both accumulated into:
    the same loss's gradient counted twice. (A second loss over a shared trunk adds its own gradient: right.)"""
    for first in retainers:
        ran, later = _later_backwards(index, first)
        for b in later:
            if ran & set(b.get("root_nodes") or ()):
                both = sorted({int(k) for k in first.get("leaf_grad_norms") or {}}
                              & {int(k) for k in b.get("leaf_grad_norms") or {}})
                if both:
                    return b, both
    return None


def _first_alive_root(index):
    for g in index.graphs.values():
        if g.get("alive_at_end"):
            for n in g.get("roots") or ():
                loc = (index.nodes.get(n) or {}).get("location")
                if loc:
                    return loc
    return None


def _fmt(n):
    n = int(n or 0)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"
