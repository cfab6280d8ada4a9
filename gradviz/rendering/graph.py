"""Trace document → ``GraphSpec``: which nodes, edges, clusters and marks a picture has. Pure; no Graphviz.

``build_graph`` reads only the document (docs/trace-format.md). It selects the graphs of one iteration, builds
a working graph of items (ops, leaves, cut points), reshapes it so it stays drawable (``collapse``), then marks
what the diagnostics found and styles everything (``style``).
"""

import operator

from ..document import CUT_ORIGINS, DocIndex, is_accumulate_grad
from . import collapse
from .ir import IR, Item
from .style import forward_op, human_bytes, shape_text, style_spec, tensor_name


def select_graphs(index, iteration=None, graphs=None):
    """Graph ids to draw: the given ones, those of ``iteration``, or by default the last iteration's."""
    if graphs is not None:
        missing = [g for g in graphs if g not in index.graphs]
        if missing:
            raise ValueError(f"no graph {missing[0]} in this trace (graphs: 0–{len(index.graphs) - 1})")
        return list(graphs)
    full = [g for g in index.graphs.values() if g.get("full", True) and g.get("nodes")]
    if iteration is None:
        if not full:
            return []
        iteration = max(g["iteration"] for g in full)
    chosen = [g["id"] for g in full if g["iteration"] == iteration]
    if not chosen:
        seen = _ranges(sorted({g["iteration"] for g in full})) or "none"
        why = ""
        schedule = index.doc.get("schedule") or {}
        if schedule.get("mode") == "light" and not any(r.get("first", 0) <= iteration <= r.get("last", -1)
                                                       for r in schedule.get("full") or ()):
            script = index.doc.get("script") or "SCRIPT"
            why = (f"; it was a light iteration, watched but not recorded: `gradviz run --trace-steps "
                   f"{iteration}:{iteration} {script}` records it")
        raise ValueError(f"no graph recorded in iteration {iteration} (iterations with graphs: {seen}){why}")
    return chosen


def _ranges(numbers):
    """``[0, 1, 2, 8, 16, 17]`` -> ``"0–2, 8, 16–17"``."""
    parts = []
    for n in numbers:
        if parts and parts[-1][1] == n - 1:
            parts[-1][1] = n
        else:
            parts.append([n, n])
    return ", ".join(f"{a}" if a == b else f"{a}–{b}" for a, b in parts)


READABLE_NODES = 100  # a picture above this is collapsed by module depth when no depth is given
RANKDIRS = ("TB", "LR", "BT", "RL")
_ORDER = operator.attrgetter("order")  # (a sort key called per item: no Python call each)


def working_graph(doc, iteration=None, graphs=None, forward=False, fold_loops=True, index=None):
    """(index, chosen graph ids, their node ids, the working graph) before any collapsing: items, module
    clusters, graph clusters and folded loops. ``index``: ``doc``'s ``DocIndex`` when the caller has one."""
    index = index if index is not None else DocIndex(doc)
    chosen = select_graphs(index, iteration, graphs)
    node_ids = sorted([n for g in chosen for n in index.graphs[g].get("nodes", []) if n in index.nodes])
    ir = IR()
    ir.graph_ids = set(chosen)
    (_forward_items if forward else _backward_items)(ir, index, node_ids)
    _assign_calls(ir, index)
    _graph_clusters(ir, index, chosen)
    ir.unfolded_size = ir.size()
    if fold_loops:
        collapse.fold_repeats(ir, module_classes=index.modules)
    return index, chosen, node_ids, ir


def folded(unfolded, fold_loops=True):
    """``working_graph``'s result with ``fold_loops``, from its result without (``unfolded``, left as it is):
    one walk for a picture and for its overview, which folds repeats its own way."""
    index, chosen, node_ids, ir = unfolded
    ir = ir.copy()
    if fold_loops:
        collapse.fold_repeats(ir, module_classes=index.modules)
    return index, chosen, node_ids, ir


def choose_depth(doc, graph_ids, node_budget, forward=False, fold_loops=True, at_least=0, open_single=False,
                 index=None, base=None):
    """The module depth to draw graphs ``graph_ids`` of trace document ``doc`` at so the picture has at most
    ``node_budget`` nodes: the deepest that fits (a transformer's layers as boxes rather than 100 ops). The
    whole graph's depth when it fits as it is; ``at_least`` (0 by default) when nothing deeper fits: the inside
    of a module box is drawn at least one level below the box, or it would be the box again. ``open_single``:
    never a depth at which every op is in one and the same box (a picture of one box says nothing; the page
    draws the box's inside instead, over the budget if need be). ``index``: ``doc``'s ``DocIndex``, if made;
    ``base``: ``working_graph``'s result for the same arguments, when the caller has it (it is not changed)."""
    # (only read here: the caller's ``base`` needs no copy)
    ir = base[3] if base is not None else \
        working_graph(doc, graphs=graph_ids, forward=forward, fold_loops=fold_loops, index=index)[3]
    depth = max(collapse.depth_for_budget(ir, node_budget), at_least)
    deepest = collapse.module_depth(ir) if open_single else 0
    while open_single and depth < deepest and collapse.one_box(ir, depth):
        depth += 1
    return depth


def build_graph(doc, iteration=None, depth=None, show_saved=False, show_grads=False, forward=False,
                max_nodes=500, graphs=None, ghost_uses=4, fold_loops=True, rankdir=None,
                node_budget=READABLE_NODES, architecture=False, index=None, base=None, base_kept=True):
    """The picture of one iteration's graph(s) as a ``GraphSpec``.

    ``depth``: collapse modules deeper than this into boxes; when not given and the picture has more than
    ``node_budget`` nodes (None: no budget), the deepest depth that fits it (``choose_depth``).
    ``max_nodes``: the hard cap, after collapsing: keep the nodes nearest the root. ``ghost_uses``: leaves used
    this often are drawn once per use. ``fold_loops``: draw an unrolled loop once with its repeat count.
    ``rankdir``: TB, LR, BT or RL (default: the backward graph bottom to top, the forward view top to bottom).
    ``architecture``: the forward view with every module as one box (its class, parameters, input and output
    shapes) and the ops between modules as ops, as torchview draws a model. ``index``: ``doc``'s ``DocIndex``
    when the caller has one (a page drawing many parts of one document). ``base``: ``working_graph(doc,
    iteration, graphs, forward, fold_loops, index)`` made once for several pictures of it (not changed here);
    ``base_kept`` False: the caller has no further use for ``base``, reshaped in place rather than copied.
    """
    rankdir = check_rankdir(rankdir)
    forward = forward or architecture
    if base is not None:
        index, chosen, node_ids, ir = base
    else:
        index, chosen, node_ids, ir = working_graph(doc, iteration, graphs, forward, fold_loops, index)
    copy = base is not None and base_kept  # (the caller's ``base`` stays as it is: collapsed into a copy)
    before, folded = ir.unfolded_size, ir.size()
    budget = min(node_budget, max_nodes) if node_budget else max_nodes
    if depth is not None or architecture:
        if depth is None:
            depth = collapse.depth_for_budget(ir, budget, modules=True)
        ir, copy = collapse.collapse_depth(ir, depth, index.modules, shape_text, architecture, copy), False
    elif ir.size() > budget:
        fitting = collapse.depth_for_budget(ir, budget)
        if fitting < collapse.module_depth(ir):  # (only here: it counts every item's module keys)
            ir, copy = collapse.collapse_depth(ir, fitting, index.modules, shape_text, copy=copy), False
            ir.notes[-1] += f" to fit {budget} nodes (choose with --depth / depth=)"
    if copy:
        ir = ir.copy()
    if ir.size() > max_nodes:
        collapse.truncate(ir, max_nodes)
    if folded > max_nodes and 0 < ir.size() < before:  # (folding alone never needs saying: the fold is drawn)
        ir.notes.insert(0, f"too large to draw whole: {before:,} nodes > max_nodes {max_nodes}, so")
    collapse.ghost_leaves(ir, ghost_uses)
    return style_spec(ir, index, chosen, node_ids, forward=forward, show_saved=show_saved,
                      show_grads=show_grads, rankdir=rankdir or ("TB" if forward else "BT"),
                      architecture=architecture)


def check_rankdir(rankdir):
    """``rankdir`` upper-cased, or None for the default; a ValueError naming the choices otherwise."""
    if rankdir is None:
        return None
    if not isinstance(rankdir, str) or rankdir.upper() not in RANKDIRS:
        raise ValueError(f"unknown rankdir `{rankdir}`: use one of {', '.join(RANKDIRS)}")
    return rankdir.upper()


# -- items ----------------------------------------------------------------------------------------------------
def _op_item(index, node, forward):
    title = node["op"]
    if node.get("custom"):
        title = node["class_name"]
    elif forward:  # the forward op, not its backward node: AddmmBackward0 -> Addmm
        title = forward_op(node)
    item = Item(f"n{node['id']}", "op", (node["id"],), title, shape=tuple(node.get("shape") or ()),
                nodes=[node["id"]], variables=list(node.get("outputs") or []))
    names = [name for name in [index.variables.get(v, {}).get("name") for v in item.variables] if name]
    if names:
        item.lines.append("→ " + ", ".join(names))
    if node.get("custom"):
        item.flags.add("custom")
    if node.get("nonfinite"):
        item.flags.add("nonfinite" if node["nonfinite"] != "backward" else "nonfinite-grad")
    return item


def _leaf_flags(var):
    flags = {"parameter" if var.get("is_parameter") else "input"}
    if var.get("source") is not None or var.get("origin") in CUT_ORIGINS:
        flags.add("from-cut")
    return flags


def _variable_item(index, var_id, key, kind, order):
    var = index.variables.get(var_id) or {}  # an id may name a dropped record: drawn by its id
    item = Item(key, kind, order, tensor_name(index, var_id), shape=tuple(var.get("shape") or ()),
                variables=[var_id], flags=_leaf_flags(var) if kind == "leaf" else set())
    if kind == "cut":
        how = ".data" if var.get("origin") == "data" else "numpy()" if var.get("origin") == "numpy" else "detach()"
        item.lines.append(f"cut by {how}")
    elif kind == "const":
        item.lines.append("no grad")
    return item


def _cut_source(ir, index, item, var_id, drawn):
    # Link a cut Variable back to where it was cut from, as a dashed break, when that is drawn too.
    source = index.variables.get((index.variables.get(var_id) or {}).get("source"))
    # follow `.data` of `.data`… (Variable(y1.data) wraps the `.data` result, itself cut from y1)
    for _ in range(20):
        upstream = index.variables.get(source.get("source")) if source is not None else None
        if source is None or source.get("node") is not None or upstream is None:
            break
        source = upstream
    if source is None:
        return
    producer = source.get("node")
    if producer in drawn and f"n{producer}" in ir.items:
        ir.edge(f"n{producer}", item.key, "cut")
    else:
        where = f" (graph {index.nodes[producer]['graph']})" if producer in index.nodes else ""
        item.lines.append(f"from {tensor_name(index, source['id'])}{where}")


def _backward_items(ir, index, node_ids):
    drawn, accumulators = set(node_ids), set()  # (the latter read again below: its op is normalised once)
    for node_id in node_ids:
        node = index.nodes[node_id]
        if is_accumulate_grad(node):
            accumulators.add(node_id)
        if node_id in accumulators and node.get("variable") is not None:
            item = _variable_item(index, node["variable"], f"n{node_id}", "leaf", (node_id,))
            item.nodes = [node_id]
            ir.add(item)
        else:
            ir.add(_op_item(index, node, forward=False))
    for node_id in node_ids:
        node = index.nodes[node_id]
        in_vars = node.get("input_variables") or []
        for slot, (source, _) in enumerate(node.get("inputs") or []):
            if source is not None and source in drawn:
                ir.edge(f"n{source}", f"n{node_id}")
            elif source is not None:
                ir.edge(_external_item(ir, index, source, (node_id, -2)), f"n{node_id}")
            elif source is None and slot < len(in_vars) and in_vars[slot] in index.variables:
                var = index.variables[in_vars[slot]]
                if var.get("origin") in CUT_ORIGINS or var.get("source") is not None:
                    key = f"v{var['id']}"
                    if key not in ir.items:
                        _cut_source(ir, index, ir.add(_variable_item(index, var["id"], key, "cut", (node_id, -1))),
                                    var["id"], drawn)
                    ir.edge(key, f"n{node_id}")
    for node_id in node_ids:
        var_id = index.nodes[node_id].get("variable")
        if node_id in accumulators and var_id in index.variables:
            _cut_source(ir, index, ir.items[f"n{node_id}"], var_id, drawn)
    _mark_roots(ir, index, node_ids)


def _forward_items(ir, index, node_ids):
    """The forward data flow: the backward graph's edges reversed (``inputs`` are the engine's own links, so the
    picture is connected on every engine), parameters and inputs as leaves, and the inputs that need no gradient
    (constants, cuts, the model's input) from ``input_variables``, which lines up with ``inputs``."""
    drawn = {n for n in node_ids if not is_accumulate_grad(index.nodes[n])}
    for node_id in sorted(drawn):
        ir.add(_op_item(index, index.nodes[node_id], forward=True))
    for node_id in sorted(drawn):
        node = index.nodes[node_id]
        inputs = node.get("inputs") or []
        in_vars = node.get("input_variables") or []
        aligned = len(in_vars) >= len(inputs)  # (variables that feed no input, as an index, come after)
        for slot, (source, _) in enumerate(inputs):
            if source is not None:
                ir.edge(_forward_source(ir, index, source, drawn, (node_id, -2)), f"n{node_id}")
            elif aligned and in_vars[slot] is not None:
                ir.edge(_forward_leaf(ir, index, in_vars[slot], drawn, (node_id, -1)), f"n{node_id}")
        for var_id in in_vars[len(inputs):] if aligned else ():
            # an argument that feeds no input: drawn when it is an index or a mask (token ids into an embedding,
            # a loss's target), not a float buffer (batch norm's running mean, one per layer, says little)
            dtype = (index.variables.get(var_id) or {}).get("dtype") or ""
            if var_id is not None and not dtype.startswith(("float", "bfloat", "complex")):
                ir.edge(_forward_leaf(ir, index, var_id, drawn, (node_id, -1)), f"n{node_id}")
    _mark_roots(ir, index, node_ids)


def _forward_source(ir, index, source, drawn, order):
    """The item a forward edge starts from: a drawn op, a parameter or input (its AccumulateGrad), or an
    earlier graph."""
    if source in drawn:
        return f"n{source}"
    node = index.nodes.get(source)
    if node is not None and is_accumulate_grad(node) and node.get("variable") is not None:
        return _forward_leaf(ir, index, node["variable"], drawn, order)
    return _external_item(ir, index, source, order)


def _forward_leaf(ir, index, var_id, drawn, order):
    key = f"v{var_id}"
    if key not in ir.items:
        var = index.variables.get(var_id) or {}
        cut = var.get("origin") in CUT_ORIGINS or var.get("source") is not None
        kind = "cut" if cut and not var.get("requires_grad") else "leaf" if var.get("requires_grad") else "const"
        item = ir.add(_variable_item(index, var_id, key, kind, order))
        if cut:
            _cut_source(ir, index, item, var_id, drawn)
    return key


def _external_item(ir, index, node_id, order):
    """One box per earlier graph that a drawn node takes an input from (``total_loss += loss`` links each
    iteration's graph to the one before it): that link is what keeps the earlier graph alive."""
    node = index.nodes.get(node_id)
    graph = node.get("graph") if node else None
    if graph is not None and graph in ir.graph_ids:  # part of a graph drawn on its own: the rest is elsewhere
        return _outside_item(ir, node, order)
    key = f"x{graph}" if graph is not None else f"x_n{node_id}"
    if key not in ir.items:
        info = index.graphs.get(graph) or {}
        if graph is None:
            title, lines = "an earlier graph", ["its records were dropped"]
        else:
            iteration = info.get("iteration", node.get("iteration"))
            title, lines = f"graph {graph}", [f"iteration {iteration}, not drawn"]
        if node is not None:
            lines.insert(0, f"{node['op']} {shape_text(tuple(node.get('shape') or ()))}")
        ir.add(Item(key, "external", order, title, lines, nodes=[node_id] if node else []))
    return key


def _outside_item(ir, node, order):
    """A node of this very graph left out of this view (a module's inside, an unfolded loop, the nodes past
    ``max_nodes``): one box per such node, by its op, pointing back to the view this one opens from. It claims
    no node id: search and deep links land on the node where it is drawn."""
    key = f"o{node['id']}"
    if key not in ir.items:
        ir.add(Item(key, "outside", order, node["op"], ["outside this view"], shape=tuple(node.get("shape") or ())))
    return key


def _mark_roots(ir, index, node_ids):
    """Flag the ops nothing in the view consumes as roots, unless their graph's record names its roots and
    they are not among them (a part view's last op feeds the rest of its graph: it is not the loss)."""
    consumers = ir.consumers()
    for node_id in node_ids:
        item = ir.items.get(f"n{node_id}")
        if item is None or item.kind != "op" or "data" in [e.kind for e in consumers[item.key]]:
            continue
        graph = index.graphs.get(index.nodes.get(node_id, {}).get("graph"))
        if graph is None or graph.get("roots") is None or node_id in graph["roots"]:
            item.flags.add("root")


# -- clusters -------------------------------------------------------------------------------------------------
def _walked_modules(index, node_ids):
    """{node id: module path} for nodes of a graph walked after the fact (``external``) that name no module: the
    modules shared by the nearest ops that name one, before and after it (a chain of views between two ops of
    ``layers.1.self_attn`` ran inside it; the walk itself tells only ops reading a module's parameters)."""
    external = [n for n in node_ids if index.nodes.get(n, {}).get("external")]
    if not external:
        return {}
    named = {n: index.nodes[n].get("module") for n in external if index.nodes[n].get("module")}
    inputs = {n: [s for s, _ in index.nodes[n].get("inputs") or [] if s in index.nodes] for n in external}
    consumers = {}
    for n in external:
        for source in inputs[n]:
            consumers.setdefault(source, []).append(n)

    def nearest(start, step):
        found, seen, todo = [], {start}, list(step.get(start, []))
        while todo:
            n = todo.pop()
            if n in seen:
                continue
            seen.add(n)
            if n in named:
                found.append(named[n])
            else:
                todo += step.get(n, [])
        return found

    out = {}
    for n in external:
        if n in named:
            continue
        before, after = nearest(n, consumers), nearest(n, inputs)  # backward edges: inputs ran before it
        if before and after:
            shared = _shared_prefix(before + after)
            if shared:
                out[n] = shared
    return out


def _shared_prefix(stacks):
    prefix = list(stacks[0])
    for stack in stacks[1:]:
        count = 0
        while count < len(prefix) and count < len(stack) and prefix[count] == stack[count]:
            count += 1
        prefix = prefix[:count]
    return prefix


def _assign_calls(ir, index):
    """One cluster key per module call: consecutive nodes under the same module path are one call. Nodes built
    before any trace (``external``: a graph walked after the fact, as ``render(loss, model=)`` does) come in walk
    order, not the order they ran in, so there each module path is one call."""
    counts, previous = {}, set()  # (``counts`` has every module path met: whether a name is one's is read there)
    ops = sorted([i for i in ir.items.values() if i.kind == "op"], key=_ORDER)
    inferred = _walked_modules(index, [item.nodes[0] for item in ops])
    stacks = {}  # op key -> its module paths, one per call key
    for item in ops:
        node = index.nodes[item.nodes[0]]
        stack = stacks[item.key] = node.get("module") or inferred.get(node["id"]) or []
        external = node.get("external")
        keys = []
        for path in stack:
            if path not in previous and not (external and path in counts):
                counts[path] = counts.get(path, 0) + 1
            keys.append(f"m:{path}#{counts[path]}")
        item.calls = keys
        previous = set(stack)
    # A parameter sits in its module's cluster when one call of that module (by its path) uses it.
    consumers = ir.consumers()
    for item in ir.items.values():
        if "parameter" not in item.flags or not item.variables:
            continue
        name = index.variables[item.variables[0]].get("name") or ""
        # the modules whose path leads the name up to a dot ("model.0" of "model.0.weight"), the longest
        owner, at = None, len(name)
        while owner is None and (at := name.rfind(".", 0, at)) > 0:
            owner = name[:at] if name[:at] in counts else None
        if owner is None:
            continue
        calls = set()
        for edge in consumers[item.key]:
            paths = stacks.get(edge.dst)
            if paths is None:
                paths = [_path_of(k) for k in ir.items[edge.dst].calls]
            if owner in paths:
                calls.add(tuple(ir.items[edge.dst].calls[:paths.index(owner) + 1]))
        if len(calls) == 1:
            item.calls = list(calls.pop())
    for item in ir.items.values():
        for key in item.calls:
            if key in ir.clusters:  # labelled by an item before (the first one's label stays)
                continue
            path = _path_of(key)
            cls = index.modules.get(path)
            label = [path + (f" ({cls})" if cls else "")]
            if counts[path] > 1:
                label.append(f"call {key.rsplit('#', 1)[1]}")
            ir.clusters.setdefault(key, ("module", label))


def _path_of(call_key):
    return call_key[2:].rsplit("#", 1)[0]


def _graph_clusters(ir, index, chosen):
    """Wrap each graph in its own cluster when several are drawn or when one is retained (shaded)."""
    retained = {g: retained_info(index, g) for g in chosen}
    retained = {g: info for g, info in retained.items() if info is not None}
    if len(chosen) < 2 and not retained:
        return
    graph_of = {n: g for g in chosen for n in index.graphs[g].get("nodes", [])}
    for item in ir.items.values():
        graph = next((graph_of[n] for n in item.nodes if n in graph_of), None)
        if graph is None and item.variables:
            graph = next((graph_of[n] for e in ir.edges if e.src == item.key
                          for n in ir.items[e.dst].nodes if n in graph_of), None)
        if graph is not None:
            item.calls = [f"g:{graph}"] + item.calls
    for g in chosen:
        info = index.graphs[g]
        label = [f"graph {g} (iteration {info.get('iteration')})"]
        if g in retained:
            label.append(retained[g])
        ir.clusters[f"g:{g}"] = ("retained" if g in retained else "graph", label)


def held_bytes(index, graph_id):
    """Bytes the graph's nodes still hold for backward: saved tensors of nodes no backward freed, each saved
    Variable once, parameters left out (they belong to the model) — the figure the memory table adds up."""
    seen, total = set(), 0
    for node_id in index.graphs[graph_id].get("nodes", []):
        node = index.nodes.get(node_id)
        if node is None or node.get("freed_by") is not None:
            continue
        for number, saved in enumerate(node.get("saved") or []):
            var = index.variables.get(saved.get("variable"))
            if var is not None and var.get("is_leaf") and var.get("requires_grad"):
                continue
            key = ("v", saved["variable"]) if var is not None else ("n", node_id, number)
            if key not in seen:
                seen.add(key)
                total += saved.get("bytes") or 0
    return total


def retained_info(index, graph_id):
    """The shaded cluster's label when backward has run through the graph but the graph stays alive holding
    saved tensors (``retain_graph=True``, a hook or a running total keeping it), else None.

    A graph's ``freed_by`` names a backward that freed some of its nodes — with ``retain_graph=True`` and a second
    backward through part of the graph, others stay unfreed — so what is held is read node by node.
    """
    graph = index.graphs[graph_id]
    if not graph.get("alive_at_end"):
        return None
    nodes = set(graph.get("nodes", []))
    flagged = any(d["code"] == "retained-graph" and nodes & set(d.get("nodes") or [])
                  for d in index.doc.get("diagnostics", []))
    if not (flagged or graph.get("backwarded") or nodes & index.visited):
        return None
    held = held_bytes(index, graph_id)
    outputs = human_bytes(graph.get("output_bytes", 0))
    if held:
        unfreed = sum(1 for n in nodes if index.nodes.get(n, {}).get("saved") and
                      index.nodes[n].get("freed_by") is None)
        nodes_text = f"{unfreed} node{'s' * (unfreed != 1)} not freed"
        return f"retained after backward: {human_bytes(held)} of saved tensors ({nodes_text})"
    if flagged and (graph.get("backwarded") or nodes & index.visited):
        return f"kept alive after backward: {outputs} of outputs (saved tensors freed)"
    if flagged:
        return f"kept alive to the end: {outputs} of outputs, and the graphs it links to"
    return None
