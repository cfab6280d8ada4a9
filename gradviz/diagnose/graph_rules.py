"""What the graph rules share (``rules/graph_cut.py``, ``unused_parameter.py``, ``retained_graph.py``): which
backward calls succeeded, which leaves got a gradient, which parameters are trained, and whether a per-iteration
series keeps growing."""


def succeeded(index):
    return [b for b in index.backwards if not b.get("error")]


def got_grad(index, done):
    """The leaves that got a gradient from the backward calls ``done``: named in their gradient norms, or whose
    accumulator a backward visited."""
    leaves_of = {}  # accumulator node -> its leaves: one pass over the variables, not one per backward call
    for v in index.variables.values():
        accumulator = v.get("accumulator")
        if accumulator is not None:
            leaves_of.setdefault(accumulator, []).append(v["id"])
    got = set()
    for b in done:
        got.update(int(k) for k in (b.get("leaf_grad_norms") or {}))
        for node in b.get("visited") or ():
            if node in leaves_of:
                got.update(leaves_of[node])
    return got


def optimized(index):
    params = set()
    for e in index.events_of("optimizer"):
        params.update(e.get("parameters") or ())
    return params


def trainable(index):
    """Leaves meant to be trained: parameters, and any Variable handed to an optimizer, that require grad when
    first seen and still did at the end (a layer frozen later is not meant to train, optimizer or not)."""
    opt = optimized(index)
    return sorted(vid for vid, v in index.variables.items()
                  if v.get("is_leaf", True) and v.get("node") is None and v.get("requires_grad")
                  and v.get("requires_grad_final") is not False and (v.get("is_parameter") or vid in opt))


def trained_here(index):
    """The trainable leaves this script trains: those given to an optimizer when it uses one (a DQN's target
    network, detached from the loss on purpose and updated by copying, is a model but not trained here), every
    trainable leaf when it uses none (parameters updated by hand)."""
    opt = optimized(index)
    return [vid for vid in trainable(index) if not opt or vid in opt]


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
