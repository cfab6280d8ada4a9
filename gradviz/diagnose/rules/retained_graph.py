"""retained-graph: finished graphs kept alive, holding memory: growing from one iteration to the next (a line that
chains each iteration's graph to the next, ``retain_graph=True`` in a loop), or left over at the end."""

from ...document import is_accumulate_grad
from ...document.index import code_text
from ..graph_rules import growing
from ..records import related
from ..registry import Code, rule
from ..training_causes import carry_before, carry_cause, leaking

RETAINED_GRAPH = Code("retained-graph", "warning", "finished graphs kept alive, holding memory",
                      """\
Graphs that backward has finished with (or never ran on) are still alive, holding their saved buffers.

A graph lives as long as anything refers to a Variable in it. Each training iteration builds a new one; if
something keeps the old ones alive, memory grows every iteration until the process runs out of it. The usual
causes are:
  - `retain_graph=True`, which keeps a graph's saved buffers after backward;
  - a running total that is itself a Variable: `total_loss += loss` chains every iteration's graph to the
    next one;
  - lists of outputs or losses kept for logging; hooks or closures that hold Variables.

gradviz reports the bytes held after each iteration, warns when they grow, and names the line that links the
iterations (such as the accumulation into total_loss) where it can find it.

The mistake (the seed's hook answer in a training loop):

    for X, y in batches:
        y1 = model1(X)
        loss = criterion(model2(y1), y)
        y1.register_hook(extract(y1))
        loss.backward(retain_graph=True)      # keeps this graph's buffers
        y1.backward(y1.grad)
        epoch_loss += loss                    # and keeps every graph alive

The fix: call backward once on a graph built from the chained models, without retain_graph, and accumulate
plain numbers: `epoch_loss += loss.item()`.

Not reported: a graph kept for a later backward of the same step that uses it and frees it (a GAN's `fake`,
detached for the discriminator's loss, then backpropagated by the generator's), a graph kept by the
`retain_graph=True` that silenced a GAN's undetached fake (reported as `gan-fake-not-detached`), and the rise
and fall of memory within each step of a loop with several backward calls: gradviz warns when the memory or
the number of graphs keeps rising from one part of the run to the next. A line that chains each iteration's graph
to the next is named from the third iteration on when one more graph is alive after each (a short run, such as a
Lightning `Trainer(max_steps=3)` with `self.total_loss += loss` in `training_step`).

In the picture: retained graphs are shaded, with their byte size.
""")


@rule(RETAINED_GRAPH, order=30)
def retained_graph(ctx, out):
    index = ctx.index
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
        retainers = [b for b in retainers if not _shared_by_a_second_loss(index, b) and not leaking(index, b)]
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
    carry = carry_before(index, None)
    cause = None
    if carry is not None:  # what chains the graphs is the carried state: detaching it is the whole fix
        sentence, hint, cause = carry_cause(index, carry)
        parts.append(sentence)
    nodes = [n for _, ids in keepers for n in ids]
    for b in retainers:
        nodes.extend(b.get("root_nodes") or ())
    out.add("retained-graph", " ".join(parts), hint, location, severity=None if growing_ else "info",
            related=[related("retain_graph=True here", retainers[0].get("location")) if retainers else None,
                     related("hook registered here", hooks[0].get("location")) if hooks else None, cause],
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
