"""The two graph-shaped mistakes of a loss, looked for near a light iteration's roots (``loss-broadcast``,
``softmax-wrong-dim``).

A full iteration records every op with its line and shapes, and the rules read them from the graph. A light
iteration records no op; a mistake made only there (a loss branch first taken at step 77) would go unnamed.
What PyTorch's graph still tells at the backward's start is enough to see the mistake, not its line: a few
levels of nodes from the root (the loss's own ops), their classes, each node's output shapes
(``_input_metadata``), which inputs need no gradient (no edge), and a softmax's saved ``dim`` and result.
``sightings(fn)`` lists what it finds there, keyed so that the same mistake on the same shapes is one sighting;
the light watch makes the iterations after a new one full (where the rules name it at its line) and lists it in
the document's ``unseen`` (the line of the iteration it was first seen on was not recorded).
"""

DEPTH = 5  # levels of nodes from a root looked at
NODE_LIMIT = 48  # nodes looked at per root
_ELEMENTWISE = {"SubBackward0", "MulBackward0", "DivBackward0", "AddBackward0", "RsubBackward1"}
_SOFTMAX = {"SoftmaxBackward0", "LogSoftmaxBackward0"}
_LOSSES = {"NllLossBackward0", "NllLoss2DBackward0", "CrossEntropyLossBackward0"}


def sightings(fn):
    """``[(code, key, what)]`` for the mistakes near ``fn`` (a root's node); ``what`` says it in words."""
    found = []
    seen = {fn}
    level = [(fn, False)]  # (node, a classification loss above it)
    for _ in range(DEPTH):
        following = []
        for node, under_loss in level:
            name = type(node).__name__
            under_loss = under_loss or name in _LOSSES
            if name in _ELEMENTWISE:
                found.extend(_broadcast(node, name))
            elif name in _SOFTMAX and under_loss:
                found.extend(_over_batch(node, name))
            for child, _ in node.next_functions:
                if child is not None and child not in seen and len(seen) < NODE_LIMIT:
                    seen.add(child)
                    following.append((child, under_loss))
        level = following
        if not level:
            break
    return found


def broadcast_candidates(fn):
    """What a torch whose nodes carry no output shapes (2.4) still tells of a possible ``loss-broadcast`` near
    ``fn`` (a root's node): each elementwise node with one input needing grad and one needing none, as (level, its
    class, the class of the node feeding it). A light iteration with a candidate no recorded iteration had may
    hold a broadcast it cannot see; one whose candidates were all recorded was checked there."""
    found = set()
    seen = {fn}
    level = [fn]
    for depth in range(DEPTH):
        following = []
        for node in level:
            edges = [child for child, _ in node.next_functions]
            name = type(node).__name__
            if name in _ELEMENTWISE and len(edges) == 2 and (edges[0] is None) != (edges[1] is None):
                fed = edges[0] if edges[1] is None else edges[1]
                found.add((depth, name, type(fed).__name__))
            for child in edges:
                if child is not None and child not in seen and len(seen) < NODE_LIMIT:
                    seen.add(child)
                    following.append(child)
        level = following
    return found


def _shape(node, index):
    metadata = getattr(node, "_input_metadata", None)  # (a torch without it: nothing is seen)
    if metadata is None or index >= len(metadata):
        return None
    return tuple(metadata[index].shape)


def _broadcast(node, name):
    """An elementwise node whose (N, N) output came from a (N, 1) input needing grad and one needing none."""
    out = _shape(node, 0)
    edges = node.next_functions
    if out is None or len(out) != 2 or out[0] != out[1] or out[0] < 2 or len(edges) != 2:
        return []
    for (a, nr), (b, _) in (edges, edges[::-1]):
        if a is not None and b is None and _shape(a, nr) == (out[0], 1):
            n = out[0]
            return [("loss-broadcast", ("loss-broadcast", name, out),
                     f"a ({n}, 1) value broadcast to ({n}, {n}) by {name} against one needing no gradient")]
    return []


def _over_batch(node, name):
    """A softmax over dim 0 of a tensor with more than one row, feeding a classification loss."""
    try:
        dim, result = node._saved_dim, node._saved_result
    except (AttributeError, RuntimeError):  # (freed, or a torch that names them otherwise)
        return []
    shape = tuple(result.shape)
    if len(shape) < 2 or shape[0] < 2 or dim not in (0, -len(shape)):
        return []
    return [("softmax-wrong-dim", ("softmax-wrong-dim", name, shape),
             f"{name} over dim 0 (the batch) of a {shape} tensor feeding a classification loss")]
