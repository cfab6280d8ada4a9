"""silent-inplace: a value that a live graph saved for backward, changed through a path with a version counter
of its own (``.data``, a numpy array sharing its memory). No engine notices, PyTorch included: backward computes
with the new values and the gradient is silently wrong.

The tracer records two kinds of fact (docs/trace-format.md): an ``inplace`` event whose ``silent_saved_by``
lists the live nodes that saved the written memory under another version counter, and a ``numpy_write`` event
for a numpy array, taken from a saved storage, whose contents changed before backward reached the saving node.
"""

from ...document.index import code_text
from ..records import related
from ..registry import Code, rule

SILENT_INPLACE = Code("silent-inplace", "error",
                      "a value saved for backward changed through `.data` or numpy, unnoticed",
                      """\
A value that a graph had saved for its backward pass was changed in place through a path with a version
counter of its own: `.data`, or a numpy array sharing its memory. No error is raised — not by gradviz's engine,
not by PyTorch — and backward computes the gradient from the changed values: it is silently wrong.

`stale-version` protects saved values: every in-place op bumps the storage's version counter, and backward
refuses a saved tensor whose version moved. But `y.data` is a new tensor on the same memory with a *new*
counter, and a numpy array has no counter at all, so writes through them move nothing backward checks.
(Reproduced from a PyTorch issue: zeroing a sigmoid's output through `.data` makes the input's gradient all
zeros, with no error.)

The mistake:

    y = torch.sigmoid(x)          # SigmoidBackward saves its output y
    y.data[y.data < 0.5] = 0      # written through .data: y's version counter does not move
    y.sum().backward()            # x.grad is computed from the zeroed y: all zeros where y was zeroed

and through numpy:

    a = y.detach().numpy()        # shares y's memory
    a[:] = 0                      # no engine event at all
    y.sum().backward()

gradviz reports a `.data` write at its line, naming the node that saved the value and where, once a backward
has run that node (until then nothing used the changed values). A numpy write is seen by no engine event:
gradviz copies a saved value when a numpy array is taken from it, compares when backward reaches the saving
node, and reports at the line where the array was taken, saying the write happened between there and that
backward.

The fix: change the value out of place (`y = y * mask`, `y = torch.where(y < 0.5, 0, y)`) or in a `clone()`;
take a copy before writing into a numpy array (`y.detach().numpy().copy()`); or make the change after backward.
Without `.data`, an in-place change is tracked, and a backward that needs the old value raises `stale-version`
instead of returning a wrong gradient.

Not reported (harmless): `p.data -= lr * p.grad` after backward freed the graph that saved `p`; `.data`
initialisation before any forward pass; reading `.data`; writes into a value whose saving graph was already
freed, or kept with retain_graph=True and not backwarded again.

In the picture: the nodes that saved the changed value.
""")


@rule(SILENT_INPLACE, order=20)
def silent_inplace(ctx, out):
    index = ctx.index
    timeline = index.timeline()
    for pos, (kind, e) in enumerate(timeline):
        if kind == "inplace" and e.get("silent_saved_by"):
            _through_data(index, out, e, timeline[pos + 1:])
        elif kind == "numpy_write" and e.get("saved_by"):
            _through_numpy(index, out, e)


def _through_data(index, out, e, after):
    savers = list(e["silent_saved_by"])
    used = _used_by(index, e, savers, after)
    if used is None:
        return  # no backward ran a node that saved the value after the change: nothing used the new values
    vid = e.get("variable")
    source, how = _cut_source(index, vid)
    text = code_text(e.get("location"))
    change = f"`{text}`" if text else (e.get("op") or "an in-place op")
    path = ("through `.data`, which has a version counter of its own" if how == "data" else
            "through a tensor that shares its memory but not its version counter")
    message = (f"{change} at {index.where(e.get('location'))} changed {index.var_label(source)} in place {path}: "
               f"{_savers(index, savers)} had saved it for backward, and backward at "
               f"{index.where(used.get('location'))} used the changed values. Nothing raised (PyTorch does not "
               "notice either): the gradients it computed are silently wrong.")
    hint = ("Don't write through `.data` while a graph still needs the value: change it out of place "
            "(`y = y * 2`) or in a `clone()`, or after backward (parameters: after `loss.backward()`, as "
            "`optimizer.step()` does). Written without `.data`, the change is tracked, and a backward that needs the "
            "old value raises a stale-version error instead of computing a wrong gradient.")
    _add(index, out, e, savers, source, vid, message, hint, used, how)


def _used_by(index, e, savers, after):
    """The backward that ran a saving node after the change (a record, or ``{"id", "location"}`` when its record
    left the window): recorded by the tracer (``silent_backward``), else (a document without it) the first later
    backward that visited one."""
    if "silent_backward" in e:
        return _backward(index, e["silent_backward"], e.get("silent_backward_location"))
    return next((b for kind, b in after if kind == "backward" and set(savers) & set(b.get("visited") or ())), None)


def _backward(index, bid, location):
    if bid is None:  # a light backward has no record: its line, when known
        return None if location is None else {"id": None, "location": location}
    found = next((b for b in index.backwards if b.get("id") == bid), None)
    return found if found is not None else {"id": bid, "location": location}


def _through_numpy(index, out, e):
    savers = list(e["saved_by"])
    vid = e.get("variable")
    source, _ = _cut_source(index, vid)
    used = _backward(index, e.get("backward"), e.get("backward_location"))
    text = code_text(e.get("location"))
    taken = f" (`{text}`)" if text else ""
    when = f"backward at {index.where(used.get('location'))}" if used is not None else "the backward that used it"
    message = (f"the numpy array taken from {index.var_label(source)} at {index.where(e.get('location'))}{taken} "
               f"shares its memory, and it was written between there and {when}: {_savers(index, savers)} saved "
               "that memory for backward and used the changed values. numpy writes bypass the version counter, so "
               "nothing raised (PyTorch does not notice either): the gradients are silently wrong.")
    hint = ("Copy before writing: `.detach().numpy().copy()` (or `.detach().clone().numpy()`), or write into the "
            "array only after backward.")
    _add(index, out, e, savers, source, vid, message, hint, used, "numpy")


def _add(index, out, e, savers, source, vid, message, hint, used, how):
    first = index.nodes.get(savers[0]) or {}
    out.add("silent-inplace", message, hint, e.get("location"),
            related=[related("saved here", first.get("location")),
                     related("backward used it here", used and used.get("location"))],
            nodes=savers, variables=[v for v in dict.fromkeys((source, vid)) if v is not None],
            details={"how": how, "saved_by": savers, "saved_variable": source, "event": e["id"],
                     "backward": used and used["id"]},
            order=(0, e["id"]))


def _cut_source(index, vid):
    """The Variable still in the graph that ``vid`` was cut from (``y`` for ``y.data``), and how."""
    cut = index.cuts().get(vid)
    if cut is None:
        return vid, None
    return cut[0], cut[1]


def _savers(index, savers):
    return " and ".join(f"{index.node_label(n)} at {index.where((index.nodes.get(n) or {}).get('location'))}"
                        for n in savers)
