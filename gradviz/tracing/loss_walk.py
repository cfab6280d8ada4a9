"""A loss's inputs, read at every backward from its root node (any engine's), for light iterations.

A light iteration records no graph, so a mistake in what feeds the loss (a softmax before ``cross_entropy``, a
sigmoid before ``BCEWithLogitsLoss``, probabilities into ``NLLLoss``) would show only on the full iterations the
schedule happens to pick. ``loss_markers(root)`` walks the few nodes between a backward's root and its loss
ops (the sums and scalings that combine loss terms, and the loss nodes) and names each (loss, input) pair it finds
among ``PAIRS``; the light steps add the names to the iteration's signature, so an iteration where the mistake
appears is new and the next one is recorded in full, with the lines the diagnostics name. O(1) per backward: at
most ``LIMIT`` nodes are visited.
"""

import re

# (the loss node, the op feeding its first input) that the loss-input diagnostics look for
PAIRS = frozenset({
    ("LogSoftmaxBackward", "SoftmaxBackward"),
    ("CrossEntropyLossBackward", "SoftmaxBackward"),
    ("NllLossBackward", "SoftmaxBackward"),
    ("BinaryCrossEntropyWithLogitsBackward", "SigmoidBackward"),
})
_LOSSES = frozenset(loss for loss, _ in PAIRS)
# what may lie between a backward's root and its loss nodes: the ops that combine loss terms
_COMBINERS = frozenset({"AddBackward", "SubBackward", "MulBackward", "DivBackward", "MeanBackward", "SumBackward",
                        "NegBackward", "NllLossBackward", "LogSoftmaxBackward"})
# looked through between a loss and its input (as diagnose/loss_inputs.py does)
_PASS = frozenset({"ViewBackward", "ReshapeAliasBackward", "UnsafeViewBackward", "PermuteBackward",
                   "TransposeBackward", "TBackward", "SqueezeBackward", "UnsqueezeBackward", "CloneBackward",
                   "ToCopyBackward", "SelectBackward", "SliceBackward", "IndexBackward", "ExpandBackward"})
LIMIT = 24
_OVERLOAD = re.compile(r"(Backward)\d+$")


def loss_markers(root):
    """``{"loss-input:SoftmaxBackward>LogSoftmaxBackward", …}`` for the pairs found below ``root``; empty when
    none (or ``root`` is None)."""
    found = set()
    stack = [root] if root is not None else []
    seen = 0
    while stack and seen < LIMIT:
        node = stack.pop()
        seen += 1
        name = _name(node)
        if name in _LOSSES:
            source = _first_input(node)
            hops = 0
            while source is not None and _name(source) in _PASS and hops < 8:
                source, hops = _first_input(source), hops + 1
            if source is not None and (name, _name(source)) in PAIRS:
                found.add(f"loss-input:{_name(source)}>{name}")
        if name in _COMBINERS:
            stack.extend(n for n, _ in _next(node) if n is not None)
    return found


_NAMES = {}  # a node class -> its normalised op name (PyTorch's C++ node classes are named like their op)


def _name(node):
    cls = type(node)
    name = _NAMES.get(cls)
    if name is None:
        try:
            raw = node.name()
        except Exception:  # not a graph node we can name: nothing to mark
            return None
        name = _NAMES[cls] = _OVERLOAD.sub(r"\1", raw)
    return name


def _next(node):
    return getattr(node, "next_functions", None) or ()


def _first_input(node):
    nxt = _next(node)
    return nxt[0][0] if nxt else None
