"""Turn a trace's records into the ``gradviz-trace`` JSON document (docs/trace-format.md), and write it."""

import gc
from math import isfinite
from operator import itemgetter

import numpy as np

from .._version import __version__
from ..document.model import FORMAT, VERSION, TraceDocument, write_json  # noqa: F401 - the contract owns them
from . import elide as _elide
from .grouping import STRUCTURE_NODE_LIMIT
from .no_autograd import add_no_autograd
from .records import json_float

_first = itemgetter(0)  # an edge's node id


def _loc(location):
    return None if location is None else location.as_dict()


def _first_nonfinite(first):
    out = dict(first)
    if "data_location" in out:  # the line that loaded the value it came in with (builder.nonfinite_data)
        out["data_location"] = _loc(out["data_location"])
    return out


class _Locations(dict):
    """``Location`` -> its ``as_dict()``, made once per document: records share a few locations (one per line),
    and each record gets its own copy of the dict."""

    __slots__ = ()

    def __missing__(self, location):
        found = self[location] = location.as_dict()
        return found


def plain(value):
    """A JSON-safe copy of small op metadata (tuples -> lists, numpy scalars -> numbers, anything else -> str)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return json_float(value)
    if isinstance(value, np.generic):
        return plain(value.item())
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, np.dtype):
        return value.name
    return str(value)


def _place(rec, locations):
    """A record's location dict and graph id, in one call (each record of a document asks both)."""
    location = rec.location
    if location is not None:
        location = location.as_dict() if locations is None else locations[location].copy()
    graph = rec.graph
    if graph is not None:
        while graph.parent is not None:  # the graph's root, without find()'s path compression
            graph = graph.parent
        graph = graph.id
    return location, graph


def variable_dict(rec, locations=None):
    """A variable's entry; ``locations`` (a ``_Locations``) shares the work of describing each location across
    the records of one document."""
    location, graph = _place(rec, locations)
    inputs = rec.inputs
    # requires_grad_final: what the engine said while the variable was alive, last (see Trace.stop)
    out = {"id": rec.id, "name": rec.name, "shape": list(rec.shape), "dtype": rec.dtype, "bytes": rec.nbytes,
           "requires_grad": rec.requires_grad, "requires_grad_final": rec.requires_grad_final,
           "is_leaf": rec.is_leaf,
           "is_parameter": rec.is_parameter,
           "origin": rec.origin, "node": rec.node, "accumulator": rec.accumulator, "source": rec.source,
           "volatile": rec.volatile, "grad_mode": rec.grad_mode, "module": list(rec.module),
           "location": location, "graph": graph, "op": rec.op,
           "inputs": None if inputs is None else list(inputs), "iteration": rec.iteration}
    if rec.device is not None:
        out["device"] = rec.device
    return out


def node_dict(rec, locations=None):
    """A node's entry; ``locations`` as for ``variable_dict``."""
    location, graph = _place(rec, locations)
    saved = rec.saved
    if not saved:
        saved = []
    elif len(saved) == 1:  # the commonest case, without a comprehension's call
        v, k, i, s, b, ver = saved[0]
        saved = [{"variable": v, "kind": k, "index": i, "shape": list(s), "bytes": b, "version": ver}]
    else:
        saved = [{"variable": v, "kind": k, "index": i, "shape": list(s), "bytes": b, "version": ver}
                 for v, k, i, s, b, ver in saved]
    meta = rec.meta
    return {"id": rec.id, "op": rec.op, "custom": rec.custom, "class_name": rec.class_name,
            "inputs": list(map(list, rec.inputs)), "input_variables": list(rec.input_variables),
            "outputs": list(rec.outputs), "variable": rec.variable, "shape": list(rec.shape),
            "dtype": rec.dtype or "", "saved": saved,
            "meta": plain(meta) if meta else {}, "module": list(rec.module), "location": location,
            "graph": graph, "freed_by": rec.freed_by, "nonfinite": rec.nonfinite,
            "external": rec.external, "iteration": rec.iteration}


def graph_dict(graph, structure, nodes, stopped, elided=()):
    ids = sorted(graph.nodes)
    consumed = set()  # (None too, from missing edges: never a node id)
    update = consumed.update
    for nid in ids:
        rec = nodes.get(nid)
        if rec is not None:
            update(map(_first, rec.inputs))
    roots = [nid for nid in ids if nid not in consumed and nid not in graph.accumulators]
    if graph.roots is not None:  # records let go (tracing/elide.prune): the roots found before
        roots = list(graph.roots)
    alive = graph.alive_at_stop if stopped and graph.alive_at_stop is not None else graph.alive > 0
    if elided:  # a giant graph: only its ends and diagnostic points are listed (tracing/elide.py)
        ids = [nid for nid in ids if nid not in elided]
    out = {"id": graph.id, "structure": None if structure is None else structure.id, "iteration": graph.iteration,
           "nodes": ids, "roots": roots, "saved_bytes": graph.saved_bytes, "output_bytes": graph.output_bytes,
           "freed_by": graph.freed_by, "freed_at_iteration": graph.freed_at_iteration, "alive_at_end": alive,
           "backwarded": graph.backwarded, "full": graph.full, "thread": graph.thread and dict(graph.thread),
           "external_inputs": [[a, b] for a, b in graph.external_inputs]}
    if elided or graph.elided:
        out["elided"] = {"nodes": len(elided) + graph.elided}
    return out


def structure_dict(s):
    return {"id": s.id, "signature": s.signature, "count": s.count, "first_graph": s.first_graph,
            "last_graph": s.last_graph, "iterations": [s.first_iteration, s.last_iteration],
            "node_count": s.node_count}


def backward_dict(b, elided=()):
    out = {k: v for k, v in b.items()}
    out["location"] = _loc(b["location"])
    if elided:
        visited = [n for n in b["visited"] if n not in elided]
        if len(visited) < len(b["visited"]):
            out["elided_visits"] = b.get("elided_visits", 0) + len(b["visited"]) - len(visited)
            out["visited"] = visited
            b = dict(b, visited=visited, grad_norms={k: v for k, v in b["grad_norms"].items() if k not in elided})
    # json_float, inline for the finite norms (nearly all of them): one call fewer per visited node
    out["grad_norms"] = {str(k): v if isfinite(v) else json_float(v) for k, v in b["grad_norms"].items()}
    out["leaf_grad_norms"] = {str(k): v if isfinite(v) else json_float(v) for k, v in b["leaf_grad_norms"].items()}
    out["visited"] = list(b["visited"])
    out["roots"] = list(b["roots"])
    out["root_nodes"] = list(b["root_nodes"])
    out.setdefault("graphs", [])
    out["error"] = None if b["error"] is None else plain(b["error"])
    return out


def event_dict(e):
    out = dict(e)
    out["location"] = _loc(e["location"])
    if "saved_by" in out:
        out["saved_by"] = list(out["saved_by"])
    if "parameters" in out:
        out["parameters"] = list(out["parameters"])
    for key in ("silent_backward_location", "backward_location"):  # silent-inplace's: where backward used it
        if key in out:
            out[key] = _loc(out[key])
    if "summed_grads" in out:
        out["summed_grads"] = [dict(s, parameters=list(s["parameters"]), backward_location=_loc(s["backward_location"]),
                                    previous_step_location=_loc(s["previous_step_location"]))
                               for s in out["summed_grads"]]
    return out


def memory_section(trace):
    g = trace.groups
    stopped = trace.stopped and g.at_stop is not None
    now = g.at_stop if stopped else g.point(g.iteration, closing=False)
    series = list(g.series) + g.open_points + [now]
    graphs = []
    for graph in sorted(g.graphs.values(), key=lambda x: x.id):
        if graph.parent is not None:
            continue
        alive = graph.alive_at_stop if stopped and graph.alive_at_stop is not None else graph.alive > 0
        graphs.append({"graph": graph.id, "iteration": graph.iteration, "saved_bytes": graph.saved_bytes,
                       "output_bytes": graph.output_bytes, "freed_by": graph.freed_by,
                       "freed_at_iteration": graph.freed_at_iteration, "alive_at_end": alive})
    section = {"peak_retained_bytes": g.memory.peak, "final_retained_bytes": now["retained_bytes"],
               "series": series, "graphs": graphs}
    if trace.holders:
        section["holders"] = [dict(h, location=_loc(h["location"])) for h in trace.holders]
    return section


def build_document(trace, with_diagnostics=True):
    # The document is a few dicts and lists per record, all kept: the collector's passes meanwhile (full ones
    # too, walking every object of the program) would find nothing to free. It is paused while they are made.
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        doc = _build(trace)
    finally:
        if paused:
            gc.enable()
    add_no_autograd(doc)  # a trace that saw nothing must not read as an all-clear
    if with_diagnostics:
        add_diagnostics(doc)
    return doc


# Nodes the document lists at most (each with its output, ~1 KiB of JSON: report.json stays under ~20 MiB). The
# window and the structures' graphs (tracing/grouping.py) bound how many graphs there are; this bounds their size
# together, as elide.GRAPH_NODE_LIMIT bounds one graph's.
DOCUMENT_NODE_LIMIT = 12000
STRUCTURE_LIST_LIMIT = 2000  # structures listed (~150 bytes each); the rest are counted in ``dropped``
_SHARE_FLOOR = 200  # no graph is elided below this many nodes, however many share the budget


def graph_share(sizes, budget):
    """The largest per-graph node count ``L`` such that graphs cut to ``min(size, L)`` fit ``budget`` together
    (the small ones whole, the big ones cut alike); never above ``elide.GRAPH_NODE_LIMIT`` nor below
    ``_SHARE_FLOOR``."""
    if sum(min(size, _elide.GRAPH_NODE_LIMIT) for size in sizes) <= budget:
        return _elide.GRAPH_NODE_LIMIT
    left, count = budget, len(sizes)
    for size in sorted(sizes):
        if size * count > left:  # this graph and every larger one get an equal share of what is left
            return max(_SHARE_FLOOR, min(_elide.GRAPH_NODE_LIMIT, left // count))
        left -= size
        count -= 1
    return _elide.GRAPH_NODE_LIMIT


def _build(trace):
    g = trace.groups
    structures = {k: s.copy() for k, s in g.structures.items()}
    pending = {}
    final = trace.stopped  # no later classification will look for these graphs' trails
    for graph in g.graphs.values():
        if graph.parent is None and graph.structure is None:
            pending[graph.id] = g._classify(graph, structures, final)
    by_id = {}
    for s in structures.values():
        by_id[s.id] = s
    stopped = trace.stopped and g.at_stop is not None
    graphs = []
    points = None
    elided = set()
    tops = [graph for graph in sorted(g.graphs.values(), key=lambda x: x.id) if graph.parent is None]
    limit = graph_share([len(graph.nodes) for graph in tops], DOCUMENT_NODE_LIMIT)
    for graph in tops:
        s = pending.get(graph.id)
        if s is None and graph.structure is not None:
            s = by_id.get(graph.structure.id)
        gone = ()
        if len(graph.nodes) > limit:
            if points is None:
                points = _elide.points_of(trace)
            gone = _elide.elide(graph, trace.nodes, points, _elide.shared_accumulators(tops, graph), limit)
            elided |= gone
        graphs.append(graph_dict(graph, s, trace.nodes, stopped, gone))
    variables = trace.variables.values()
    nodes = trace.nodes.values()
    dropped = dict(g.dropped, note=_drop_note(g))
    if elided:
        variables = [r for r in variables if r.node not in elided or r.pinned or r.named_by_user]
        nodes = [r for r in nodes if r.id not in elided]
        dropped["elided_nodes"] = dropped.get("elided_nodes", 0) + len(elided)
        dropped["elided_variables"] = dropped.get("elided_variables", 0) + len(trace.variables) - len(variables)
    if dropped.get("elided_nodes"):
        above = min(limit, _elide.GRAPH_NODE_LIMIT)
        elided_note = (f"{dropped['elided_nodes']} nodes of graphs above {above} nodes were elided "
                       "(each such graph lists its ends and the nodes diagnostics point at, see graphs[].elided)"
                       + (f": the document holds at most about {DOCUMENT_NODE_LIMIT} nodes, shared by its graphs"
                          if limit < _elide.GRAPH_NODE_LIMIT else ""))
        dropped["note"] = (elided_note if not g.dropped["iterations"] else f"{dropped['note']}; {elided_note}")
    exception = trace.exception
    locations = _Locations()
    doc = TraceDocument()
    doc.update({
        "format": FORMAT,
        "version": VERSION,
        "gradviz_version": __version__,
        "engine": engine_section(trace),
        "script": trace.script,
        "status": {"completed": exception is None, "exception": exception and {
            "type": exception["type"], "message": exception["message"], "location": _loc(exception["location"])}},
        "iterations": g.iteration + 1,
        "window": trace.window,
        "modules": dict(trace.modules),
        "variables": [variable_dict(r, locations) for r in variables],
        "nodes": [node_dict(r, locations) for r in nodes],
        "graphs": graphs,
        "structures": listed_structures(by_id, graphs, dropped),
        "backwards": [backward_dict(b, elided) for b in trace.backwards.values()],
        "events": [event_dict(e) for e in trace.events.values()],
        "event_summary": [{"kind": kind, "location": _loc(loc), "count": c[0], "iterations": [c[1], c[2]]}
                          for (kind, loc), c in g.event_counts.items()],
        "first_nonfinite": trace.first_nonfinite and _first_nonfinite(trace.first_nonfinite),
        "diagnostics": [],
        "memory": memory_section(trace),
        "dropped": dropped,
        "internal_errors": list(trace.internal_errors),
        "backward_checks": trace.checks.section(_loc),
        "threads": threads_section(trace),
        "unseen": unseen_section(trace),
        "schedule": schedule_section(trace),
    })
    ddp = trace.ddp_facts.section(_loc)
    if ddp is not None:  # only where DistributedDataParallel ran
        doc["ddp"] = ddp
    training = trace.training.section(_loc, _variable_id(trace)) if hasattr(trace, "training") else None
    if training is not None:  # only where a mode-dependent module ran or a mode was switched
        doc["training"] = training
    return doc


def _variable_id(builder):
    live = builder.live_variables

    def variable_id(key):
        record = live.get(key)
        return None if record is None else record.id

    return variable_id


def schedule_section(builder):
    """Which iterations were traced in full, and what the light ones found (tracing/schedule.py)."""
    section = builder.schedule.section()
    if builder.schedule.light:
        live = builder.live_variables
        names = {key: live[key].name for key in builder.light.norms if key in live and live[key].name}
        section["light"] = builder.light.section(_loc, names)
    return section


def listed_structures(by_id, graphs, dropped):
    """The document's ``structures``: every one up to ``STRUCTURE_LIST_LIMIT``; beyond, those a listed graph
    belongs to and the first others by id. The rest are counted in ``dropped["structures"]``, and the graphs
    built with them in ``dropped["structure_count"]`` (so graphs built = the listed counts + that)."""
    ordered = sorted(by_id.values(), key=lambda s: s.id)
    if len(ordered) <= STRUCTURE_LIST_LIMIT:
        return [structure_dict(s) for s in ordered]
    drawn = {graph["structure"] for graph in graphs} & set(by_id)
    room = STRUCTURE_LIST_LIMIT - len(drawn)
    listed = []
    unlisted = unlisted_count = 0
    for s in ordered:
        if s.id in drawn or room > 0:
            room -= s.id not in drawn
            listed.append(structure_dict(s))
        else:
            unlisted += 1
            unlisted_count += s.count
    dropped["structures"] = unlisted
    dropped["structure_count"] = unlisted_count
    return listed


def unseen_section(builder):
    """What ran beyond the trace's sight: each entry ``{"kind", "what", "count", "how", "location", "advice"}``.
    Threads the trace could not observe are listed here too (kind ``thread``), besides ``threads.unobserved``."""
    entries = []
    for entry in builder.unseen_entries():
        entry["location"] = _loc(entry["location"])
        entries.append(entry)
    unobserved = builder.unobserved_threads()
    if unobserved:
        names = ", ".join(t["name"] for t in unobserved[:5]) + (" …" if len(unobserved) > 5 else "")
        entries.append({"kind": "thread", "what": f"threads running beside the trace ({names})",
                        "count": len(unobserved), "how": "already running when the trace started, or started by "
                        "code it does not observe", "location": None,
                        "advice": "start the threads inside the traced block (or the script gradviz runs)"})
    return entries


def threads_section(builder):
    """Which threads the trace saw build graphs or run backward, and those it could not observe."""
    section = {"observed": [dict(t) for t in builder.threads]}
    unobserved = [dict(t) for t in builder.unobserved_threads()]
    section["unobserved"] = unobserved
    if unobserved:
        section["note"] = (f"{len(unobserved)} thread(s) ran beside the trace without it (already running when it "
                           "started, or started by code it does not observe): ops they ran, if any, are not in this "
                           "document")
    return section


def engine_section(builder):
    """``{"name", "version", "devices"}`` of the engine watched; with several (``engine="auto"`` on a script that
    also runs PyTorch), the first one's, plus ``"engines"``: every one of them."""
    engines = [dict(e, devices=list(e["devices"])) for e in builder.engines.values()]
    if not engines:
        return {"name": "gradviz", "version": __version__, "devices": ["cpu"]}
    section = dict(engines[0])
    if len(engines) > 1:
        section["engines"] = engines
    return section


def _drop_note(g):
    d = g.dropped
    schedule = getattr(g.trace, "schedule", None)
    light = schedule.light_count if schedule is not None and schedule.light else 0
    watched = (f"{light} iterations were light: watched for the classic mistakes (what they found is here), their "
               "ops not recorded (schedule.full lists the iterations recorded in full); ") if light else ""
    if not d["iterations"]:
        if light:
            return watched + "of the others, every node, variable, event and backward call is in this document"
        return "nothing was dropped: every node, variable, event and backward call is in this document"
    capped = d.get("structure_graphs")
    kept = ("the first and last graph of each structure" if not capped else
            f"the first and last graph of each structure while they fit {STRUCTURE_NODE_LIMIT} nodes (the largest "
            f"always; {capped} more were left out, their structures still counted)")
    return (f"{watched}full records were kept for the first and last {g.window} iterations, {kept} and whatever a "
            f"diagnostic points at; {d['iterations']} other iterations were summarised (structures count every "
            "graph, memory.series has every iteration, event_summary every event) and ids that refer to their "
            "records may be missing")


def add_diagnostics(doc):
    """Diagnostics are computed from the document; a failure there must never lose the trace itself."""
    try:
        from ..diagnose import diagnose

        doc["diagnostics"] = list(diagnose(doc))
    except Exception as exc:  # recorded in the document, not raised: the trace is still worth having
        doc["diagnostics"] = []
        doc["internal_errors"].append({"where": "diagnose", "type": type(exc).__name__,
                                       "message": str(exc).split("\n")[0]})
