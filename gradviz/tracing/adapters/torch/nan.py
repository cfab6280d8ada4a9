"""Which op of a graph no full iteration recorded made a NaN/Inf: read from what its nodes saved for backward.

A light iteration's loss turned NaN/Inf (``torch/light``); its ops were not recorded, but its graph is alive until
backward runs. Walked once, in the order the nodes were made: the first node that saved a non-finite result made
it; the first that saved a non-finite input got it from the op before it; an op of the table below whose saved
inputs are finite is recomputed from them (``log`` saves its input, not its NaN result).
"""

from ...data_origin import data_origin
from . import graph as tg

# node name -> how to recompute its forward from its saved tensors (attribute names, without the _raw_saved_ prefix)
_RECOMPUTE = {
    "LogBackward0": ("log", ("self",)), "Log2Backward0": ("log2", ("self",)), "Log10Backward0": ("log10", ("self",)),
    "Log1PBackward0": ("log1p", ("self",)), "SqrtBackward0": ("sqrt", ("result",)),
    "RsqrtBackward0": ("rsqrt", ("result",)), "ReciprocalBackward0": ("reciprocal", ("result",)),
    "AcosBackward0": ("acos", ("self",)), "AsinBackward0": ("asin", ("self",)), "AtanhBackward0": ("atanh", ("self",)),
    "PowBackward0": (None, ("self",)), "DivBackward0": ("div", ("self", "other")),
    "LgammaBackward0": ("lgamma", ("self",)), "DigammaBackward0": ("digamma", ("self",)),
}
WALK_LIMIT = 100_000  # nodes looked at, at most


def nonfinite_culprit(torch, root):
    """``(node, phase, data)`` for the first node (in creation order) that made a NaN/Inf value of ``root``'s graph:
    phase "forward" when its own output was not finite; "input" when the first non-finite value found is a leaf or
    a value from outside the graph (the data: then ``data`` is that saved tensor, else None); None when nothing
    saved tells."""
    nodes = _nodes(root)
    nodes.sort(key=lambda n: n._sequence_nr())
    root_inputs = 0  # floating inputs the root's node saved, all finite (else the walk returned before the end)
    for node in nodes:
        info = tg.info(node)
        if info.accumulator:
            continue
        saved = tg.saved_tensors(node, info.saved)
        bad_result = bad_input = False
        from_data = None
        for attr, i, t in saved:
            if node is root and t is not None and _floating(t) and "result" not in attr:
                root_inputs += 1
            if t is None or not _floating(t) or bool(torch.isfinite(t).all()):
                continue
            if "result" in attr:
                bad_result = True
            else:
                bad_input = True
                if from_data is None and not _requires_grad(node, attr, i):
                    from_data = t
        if bad_input:
            if from_data is not None:  # a saved input that needs no gradient: the data, not an op, carried it
                return node, "input", from_data
            producer = _producer(node)
            return (producer, "forward", None) if producer is not None else (node, "input", None)
        if bad_result or _recomputed_bad(torch, node, info, saved):
            return node, "forward", None
    if root_inputs:  # the loss's own op read finite inputs and gave a non-finite loss (an overflow in mse_loss)
        return root, "forward", None
    return None


def _nodes(root):
    found, pending, seen = [], [root], {id(root)}
    held = [root]
    while pending and len(found) < WALK_LIMIT:
        node = pending.pop()
        found.append(node)
        for child, _ in node.next_functions:
            if child is not None and id(child) not in seen:
                seen.add(id(child))
                held.append(child)
                pending.append(child)
    return found


def _requires_grad(node, attr, index):
    """Whether the saved input ``attr`` (``_raw_saved_x``) was a tensor that requires grad (a value of the graph),
    read from its unpacking attribute; True when that cannot be read (then the graph is searched instead)."""
    try:
        value = getattr(node, attr.replace("_raw_saved_", "_saved_", 1))
    except (AttributeError, RuntimeError):
        return True
    if isinstance(value, (list, tuple)):
        value = value[index] if index < len(value) else None
    return bool(getattr(value, "requires_grad", True))


def _producer(node):
    """The op node among ``node``'s inputs made last (what handed it the bad value), or None if only leaves."""
    children = [c for c, _ in node.next_functions if c is not None and not tg.info(c).accumulator]
    return max(children, key=lambda c: c._sequence_nr()) if children else None


def _floating(t):
    return t.is_floating_point() or t.is_complex()


def _recomputed_bad(torch, node, info, saved):
    how = _RECOMPUTE.get(info.name)
    if how is None:
        return False
    fn, names = how
    values = {attr.rpartition("saved_")[2]: t for attr, _, t in saved}
    args = [values.get(n) for n in names]
    if any(a is None for a in args):
        return False
    if names == ("result",):
        return not bool(torch.isfinite(args[0]).all())
    with torch.no_grad():
        if fn is None:  # pow with a Python exponent: the exponent is not a tensor; a negative base is the risk
            exponent = getattr(node, "_saved_exponent", None)
            if exponent is None:
                return False
            out = torch.pow(args[0], exponent)
        else:
            out = getattr(torch, fn)(*args)
    return not bool(torch.isfinite(out).all())


def data_line(frame, value):
    """``(name, Location)`` of the user's line that made ``value`` (a saved input that came in with the data), or
    a tensor over the same elements (the op saved a view of it); None when no user frame holds it."""
    if value is None or frame is None:
        return None
    start, numel = value.data_ptr(), value.numel()  # (a view over the same elements: ``linear`` flattens a batch)
    return data_origin(frame, value, lambda other: other.data_ptr() == start and other.numel() == numel)
