"""stale-version: an in-place change to a value a live graph saved for backward, predicted at the in-place op and
confirmed when backward raises; a backward that raised it with no in-place op on record is explained from its
message."""

from ...document import error_code
from ...document.index import code_text
from ..backward_rules import failed_with, script_stopped
from ..records import related
from ..registry import Code, rule
from ..training_causes import carry_before, carry_cause

STALE_VERSION = Code("stale-version", "error", "a Variable saved for backward was modified in place",
                     """\
A Variable that an op saved for its backward pass was modified in place before backward read it ("one of the
variables needed for gradient computation has been modified by an inplace operation").

Every storage has a version counter that each in-place op increments (`x.add_(1)`, `x[0] = 0`, `x += 1`,
`relu_`, writes through a view). An op that saves a tensor for backward records its version; backward checks
it and refuses to use a value that has changed since. gradviz predicts this at the in-place op itself, as soon
as it overwrites a storage that a graph not yet backwarded has saved, and names both lines.

The mistake:

    y = x.sigmoid()               # SigmoidBackward saves its output y
    y.mul_(2)                     # in place: y is now at version 1
    y.sum().backward()            # RuntimeError: expected version 0

The same happens through a view, which shares its base's storage and counter:

    h = x.exp()                   # ExpBackward saves h
    h[:, 0] = 0                   # writes into h through a view

The fix: use the out-of-place form (`y = y * 2`, `h = h.clone(); h[:, 0] = 0`), or apply the in-place op to a
`clone()`, or move it after backward.

An optimizer's `step()` is an in-place update of the parameters too: stepping between a forward pass (or a
`backward(retain_graph=True)`) and a backward through that graph is reported at the `step()` line. A graph
that no backward ever runs through and that is gone before the script ends (a validation pass run with grad
on, then the next training step) is not reported: nothing used the changed values.

In the picture: the node that saved the value and the in-place op, with the saved tensor's versions.
""")


@rule(STALE_VERSION, order=14)
def stale_version(ctx, out):
    index = ctx.index
    for b in failed_with(index, "stale-version"):
        if not _stale_explained(index, b):
            _stale_unexplained(index, out, b)
    _stale_versions(index, out)
    script_stopped(index, out, "stale-version")


def _stale_versions(index, out):
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
                          for n in saved_by[:3])
    if len(saved_by) > 3:
        savers += f" and {len(saved_by) - 3} more nodes"
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
    carry = None if failed is None else carry_before(index, failed.get("iteration"))
    cause = None
    if carry is not None:  # the step's update is right: backward should never have gone back that far
        sentence, hint, cause = carry_cause(index, carry)
        message += f" It went back to an earlier iteration's graph because {sentence[0].lower()}{sentence[1:]}"
    out.add("stale-version", message, hint, e.get("location"), severity=severity,
            related=[related("saved here", saver.get("location")),
                     related("backward failed here", failed and failed.get("location")), cause],
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
