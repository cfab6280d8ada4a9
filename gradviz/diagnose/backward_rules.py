"""Rules about backward calls and `.grad` reads: none-grad, nonscalar-backward, no-requires-grad, graph-freed,
stale-version and leaf-inplace (the last three also explain the exception a script died of)."""

import re

from ..document import error_code
from ..document.index import code_text, same_line
from .fixes import leaf_after_ops, requires_grad_after
from .records import related
from .why import classify, created_leaf


def none_grad(index, out):
    """Non-leaf `.grad` reads that returned None. Returns ``{event id: diagnostic key}`` for linking."""
    keys = {}
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
    return keys


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


def leaf_fix_hint(index, name, location, created):
    """How to make ``name`` (assigned at ``location`` from a tensor created with requires_grad=True at
    ``created``) the leaf itself, written for the user's line when it can."""
    line = index.where(location)
    if not same_line(location, created):
        fixed = requires_grad_after(code_text(location)) if same_line_assigns(location) else None
        then = f"write {line} as `{fixed}`" if fixed else f"call `.requires_grad_()` on the result at {line}"
        return (f"Make `{name}` itself the leaf: create the tensor at {index.where(created)} without "
                f"requires_grad=True and {then}; or keep requires_grad=True and apply the ops in place under "
                "`torch.no_grad()`.")
    fixes = leaf_after_ops(code_text(location)) if same_line_assigns(location) else None
    if fixes is None:
        return (f"Make `{name}` itself the leaf: at {line}, create the tensor without requires_grad=True, apply "
                "the ops, then call `.requires_grad_()` on the result; or create it with requires_grad=True and "
                "apply the ops in place under `torch.no_grad()`.")
    hint = f"Make `{name}` itself the leaf: write {line} as `{fixes['requires_grad_']}`"
    if fixes["no_grad"]:
        created, inplace = fixes["no_grad"]
        hint += f", or create it then scale it under no_grad: `{created}` then `with torch.no_grad(): {inplace}`"
    else:
        hint += ", or create it with requires_grad=True and apply the ops in place under `torch.no_grad()`"
    return hint + "."


def same_line_assigns(location):
    """Whether the source line of ``location`` is a whole statement (an assignment split over lines is not)."""
    text = code_text(location)
    return bool(text) and text.count("(") == text.count(")") and text.count("[") == text.count("]")


def _backward_through(index, node):
    for b in index.backwards:
        if node is not None and node in (b.get("visited") or ()):
            return b
    return None


def backward_errors(index, out, none_keys):
    """Explain each backward call that raised."""
    for b in index.backwards:
        code = error_code(b.get("error"))
        if code == "nonscalar-backward":
            _nonscalar(index, out, b, none_keys)
        elif code == "no-requires-grad":
            _no_requires_grad(index, out, b)
        elif code == "graph-freed":
            _graph_freed(index, out, b)
        elif code == "stale-version" and not _stale_explained(index, b):
            _stale_unexplained(index, out, b)


def _root(index, b):
    roots = b.get("roots") or [None]
    for r in roots:
        v = index.variables.get(r)
        if v is not None and _numel(v) != 1:
            return r
    return roots[0]


def _numel(v):
    n = 1
    for d in v.get("shape") or ():
        n *= d
    return n


def _nonscalar(index, out, b, none_keys):
    root = _root(index, b)
    v = index.variables.get(root) or {}
    read = _gradient_read(index, b)
    label = index.var_label(root)
    if read is not None and read.get("was_none"):
        source = index.var_name(read.get("variable"))
        message = (f"backward() on non-scalar {label} needs a gradient of the same shape, but got None: it "
                   f"is `{source}.grad`, read at {index.where(read.get('location'))}, which is None because "
                   f"`{source}` is not a leaf.")
        hint = ("Don't backward twice: chain the models and call backward once on the scalar loss (it already "
                f"reaches everything before `{source}`).")
    else:
        message = (f"backward() on {label} with no gradient: grad can be implicitly created only for scalar "
                   "outputs.")
        hint = ("Reduce the output to a scalar (`.sum()`, `.mean()`, a loss) or pass a gradient of its shape "
                "(`out.backward(torch.ones_like(out))`).")
    key = out.add("nonscalar-backward", message, hint, b.get("location"),
                  related=[related("root created here", v.get("location")),
                           related("None read here", read and read.get("location"))],
                  nodes=list(b.get("root_nodes") or [v.get("node")]), variables=[root],
                  details={"backward": b["id"], "gradient_from": read and read["id"]}, order=(1, b["id"]))
    if read is not None and read["id"] in none_keys:
        out.link(key, none_keys[read["id"]])


def _gradient_read(index, b):
    """The `.grad` read whose value was passed as this backward's gradient (recorded, else on the same line)."""
    if b.get("gradient_from") is not None:
        return index.events_by_id.get(b["gradient_from"])
    reads = [e for e in index.events_of("grad_read") if same_line(e.get("location"), b.get("location"))
             and e.get("iteration") == b.get("iteration")]
    return reads[-1] if reads else None


def _no_requires_grad(index, out, b):
    root = _root(index, b)
    why = classify(index, root) if root in index.variables else None
    v = index.variables.get(root) or {}
    if why is not None and why["cause"] == "requires-grad-false" and not v.get("location"):
        # Ops on values that require no grad are not recorded, so the root may have no history here: the
        # nearest value built under no_grad() or from a volatile input in this iteration tells why.
        why = _nearest_gradless(index, b) or why
    cause = why["cause"] if why else None
    reason = {
        "no-grad-mode": "it was computed under no_grad()",
        "volatile": "it was computed from a volatile input (volatile=True)",
        "non-differentiable": "it comes from a non-differentiable op (argmax, a comparison, an integer cast)",
        "cut": "it was cut out of the graph by .data/detach()",
    }.get(cause, "none of the values it was computed from required grad (are all parameters frozen?)")
    if why is not None and why["variable"] != root and why.get("location"):
        reason += f" (at {index.where(why['location'])})"
    message = (f"backward() on `{root_name(index, b, root)}`, which does not require grad and has no grad_fn: "
               f"{reason}.")
    hint = ("Compute the loss with grad mode on, from parameters that require grad: freeze only the layers you "
            "don't train, and keep no_grad()/volatile for inference.")
    out.add("no-requires-grad", message, hint, b.get("location"),
            related=[related("root computed here", v.get("location"))],
            variables=[root], details={"backward": b["id"], "why_none": why}, order=(1, b["id"]))


def _nearest_gradless(index, b):
    # Lines that built parameters are skipped: initialisers write into parameters under no_grad().
    param_lines = {(loc.get("file"), loc.get("line")) for v in index.variables.values()
                   if v.get("is_parameter") and (loc := v.get("location"))}
    candidates = [v for v in index.variables.values()
                  if v.get("origin") == "op" and v.get("iteration") == b.get("iteration")
                  and (v.get("volatile") or not v.get("grad_mode", True))
                  and ((v.get("location") or {}).get("file"), (v.get("location") or {}).get("line"))
                  not in param_lines]
    if not candidates:
        return None
    return classify(index, max(candidates, key=lambda v: v["id"])["id"])


def root_name(index, b, root):
    """How to name a backward's root: its name, else the receiver on the backward line (``loss.backward()``)."""
    name = index.var_name(root)
    if name == f"v{root}":
        match = _RECEIVER.search(code_text(b.get("location")))
        if match:
            return match.group(1)
    return name


_RECEIVER = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\.backward\(")


def _graph_freed(index, out, b):
    reach = index.reachable_from(b.get("root_nodes") or ())
    freed = sorted(n for n in reach if (index.nodes.get(n) or {}).get("freed_by") not in (None, b["id"]))
    by = sorted({index.nodes[n]["freed_by"] for n in freed})
    first = next((x for x in index.backwards if by and x["id"] == by[0]), None)
    ops = ", ".join(sorted({index.nodes[n]["op"] for n in freed})) or "its nodes"
    built = _earliest_location(index, freed)
    text = f"the backward at {index.where(first.get('location'))}" if first else "an earlier backward"
    message = (f"backward() goes through {ops} a second time, but {text} already freed their saved buffers.")
    if first is not None and first.get("iteration") != b.get("iteration"):
        message += (f" That part of the graph was built at {index.where(built)} (iteration {first.get('iteration')}) "
                    "and is reused in a later iteration.")
    hint = ("Rebuild the graph before each backward (run the forward pass inside the loop) or add the losses "
            "and call backward once; retain_graph=True is seldom the right fix — it keeps every buffer alive and "
            "accumulates into the same parameters twice.")
    out.add("graph-freed", message, hint, b.get("location"),
            related=[related("first backward ran here", first and first.get("location")),
                     related("graph built here", built)],
            nodes=freed, variables=list(b.get("roots") or ()),
            details={"backward": b["id"], "freed_by": by}, order=(1, b["id"]))


def _earliest_location(index, node_ids):
    for nid in sorted(node_ids):
        loc = index.nodes[nid].get("location")
        if loc:
            return loc
    return None


def stale_versions(index, out):
    """In-place ops on storage a live graph saved: predicted at the op, confirmed when backward raises."""
    timeline = index.timeline()
    for pos, (kind, e) in enumerate(timeline):
        if kind != "inplace" or not e.get("saved_by"):
            continue
        saved_by = set(e["saved_by"])
        failed = None
        for later_kind, b in timeline[pos + 1:]:
            if later_kind == "backward" and error_code(b.get("error")) == "stale-version" \
                    and saved_by & index.reachable_from(b.get("root_nodes") or ()):
                failed = b
                break
        if failed is None and _backwarded_before(timeline[:pos], saved_by):
            continue  # a finished (retained) graph that no backward went through again: harmless
        if failed is None and _died_unused(index, saved_by):
            continue  # a forward-only graph (a validation pass with grad on) that died without a backward
        _report_stale(index, out, e, sorted(saved_by), failed)


def _backwarded_before(items, nodes):
    for kind, b in items:
        if kind == "backward" and not b.get("error") and nodes & set(b.get("visited") or ()):
            return True
    return False


def _died_unused(index, nodes):
    """True when every graph holding ``nodes`` is known to have died before the trace ended: nothing can
    backward through them any more (a later backward through them would have failed and been seen)."""
    graphs = [index.graphs.get((index.nodes.get(n) or {}).get("graph")) for n in nodes]
    return bool(graphs) and all(g is not None and g.get("alive_at_end") is False for g in graphs)


def _report_stale(index, out, e, saved_by, failed):
    vid = e.get("variable")
    saver = index.nodes.get(saved_by[0]) or {}
    saved_var, saved_version = _saved_value(saver, vid, e)
    savers = " and ".join(f"{index.node_label(n)} at {index.where((index.nodes.get(n) or {}).get('location'))}"
                          for n in saved_by)
    text = code_text(e.get("location"))
    how = f"`{text}`" if text else (e.get("op") or "an in-place op")
    if saved_var is not None and saved_var != vid:
        changed = f"then changed in place through its view {index.var_label(vid)} by {how}"
    else:
        changed = f"then changed in place by {how}"
    head = (f"{index.var_label(saved_var if saved_var is not None else vid)} was saved for backward by {savers} "
            f"(version {saved_version}), {changed} at {index.where(e.get('location'))} (version "
            f"{e.get('old_version')} → {e.get('new_version')})")
    if failed is not None:
        message = f"{head}; backward at {index.where(failed.get('location'))} failed on it."
        severity = "error"
    else:
        message = f"{head}; a backward through {index.node_label(saved_by[0])} will fail."
        severity = "warning"
    hint = ("Use the out-of-place form (`y = y * 2` instead of `y *= 2` or `y.mul_(2)`; clamp or write into a "
            "`clone()`), or make the in-place change after backward.")
    out.add("stale-version", message, hint, e.get("location"), severity=severity,
            related=[related("saved here", saver.get("location")),
                     related("backward failed here", failed and failed.get("location"))],
            nodes=[*saved_by, e.get("node")], variables=[v for v in (saved_var, vid) if v is not None],
            details={"op": e.get("op"), "saved_version": saved_version, "old_version": e.get("old_version"),
                     "new_version": e.get("new_version"), "backward": failed and failed["id"],
                     "saved_variable": saved_var},
            order=(0, e["id"]))


def _saved_value(node, vid, e):
    """The Variable whose saved value the in-place op changed (an input saved as such, or the node's own
    output), with the version it was saved at."""
    candidates = []
    for s in node.get("saved") or ():
        if s.get("kind") == "input":
            var = s.get("variable")
        elif s.get("kind") == "output":
            outputs = node.get("outputs") or ()
            var = outputs[s.get("index", 0)] if s.get("index", 0) < len(outputs) else None
        else:
            continue
        if s.get("version") is not None and s["version"] < (e.get("new_version") or 0):
            candidates.append((var, s["version"]))
    for var, version in candidates:
        if var == vid:
            return var, version
    if candidates:
        return candidates[0]
    return None, e.get("old_version")


def _stale_explained(index, b):
    reach = index.reachable_from(b.get("root_nodes") or ())
    return any(set(e.get("saved_by") or ()) & reach for e in index.events_of("inplace"))


def _stale_unexplained(index, out, b):
    error = b.get("error") or {}
    out.add("stale-version", f"backward failed: {error.get('message')}",
            "Find the in-place op (`add_`, `x[...] = `, `+=`) on a value saved for backward and make it "
            "out of place.", b.get("location"), nodes=list(b.get("root_nodes") or ()),
            variables=list(b.get("roots") or ()), details={"backward": b["id"]}, order=(1, b["id"]))


def script_exception(index, out):
    """Explain the exception the script died of when no backward record already did."""
    exc = (index.doc.get("status") or {}).get("exception")
    code = error_code(exc)
    if code is None:
        return
    if code != "leaf-inplace" and any(error_code(b.get("error")) == code for b in index.backwards):
        return
    loc = exc.get("location")
    variables = [exc["variable"]] if exc.get("variable") is not None else []
    if code == "optimize-non-leaf":
        _optimize_non_leaf(index, out, exc)
        return
    if code == "ddp-unused-parameters":
        _ddp_reduction_error(index, out, exc)
        return
    if code == "leaf-inplace":
        message = (f"in-place operation on a leaf that requires grad: {exc.get('message')}")
        hint = ("Update parameters under `torch.no_grad()` (as optimizers do), or use an out-of-place op if the "
                "change belongs in the graph.")
    else:
        message = f"the script stopped: {exc.get('message')}"
        hint = "See the explanation of this error."
    out.add(code, message, hint, loc, variables=variables, details={"exception": exc.get("type")},
            order=(3, 0))


def _ddp_reduction_error(index, out, exc):
    """DDP's "Expected to have finished reduction" error. When the DDP watcher saw it (the document's ``ddp``
    section), the DDP rules name the parameters and the skipped line (``ddp_rules``: this process alone, or the
    job's ranks at the merge); otherwise, when this process raised it, it is explained here from the message
    alone."""
    if (index.doc.get("ddp") or {}).get("errors"):
        return
    if exc.get("type") != "RuntimeError":  # (e.g. mp.spawn's ProcessRaisedException: the child's document explains)
        return
    first = str(exc.get("message") or "").split("\n")[0]
    out.add("ddp-unused-parameters",
            f"the script stopped: DistributedDataParallel found parameters that got no gradient in the previous "
            f"iteration ({first})",
            "A branch skipped a layer, or its output did not reach the loss: pass `find_unused_parameters=True` to "
            "DistributedDataParallel(...), or use the layer in every iteration. Run with "
            "TORCH_DISTRIBUTED_DEBUG=INFO to have PyTorch name the parameters.",
            exc.get("location"), details={"exception": exc.get("type"), "ranks": [], "parameters": []},
            order=(3, 0))


def _optimize_non_leaf(index, out, exc):
    """An optimizer refused a non-leaf ("can't optimize a non-leaf Tensor"): name it, and when it is a transformed
    copy of a tensor just created with requires_grad=True, give the fix for its line."""
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
