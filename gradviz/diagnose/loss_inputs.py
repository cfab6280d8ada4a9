"""What a loss node was fed, read from the document's graph: the facts the loss-input rules share
(softmax-before-cross-entropy, sigmoid-before-bce-with-logits, nll-on-probabilities).

A loss's input is its node's first input, followed back through ops that only reshape or copy a tensor (a
language model's ``logits.view(-1, V)``), so ``F.cross_entropy(F.softmax(x, 1).view(-1, C), y)`` is seen as
well as the direct call. Both engines name the nodes the same once normalised: PyTorch's ``cross_entropy`` is a
``LogSoftmaxBackward`` feeding a ``NllLossBackward``; gradviz's engine records one ``CrossEntropyLossBackward``.
"""

from ..document import normalise_op

# ops that move or copy values without changing them: looked through between a loss and what fed it
PASS_THROUGH = frozenset({
    "ViewBackward", "ReshapeAliasBackward", "UnsafeViewBackward", "ReshapeBackward", "PermuteBackward",
    "TransposeBackward", "TBackward", "SqueezeBackward", "UnsqueezeBackward", "CloneBackward", "ToCopyBackward",
    "ExpandBackward", "ContiguousBackward", "FlattenBackward", "SliceBackward", "SelectBackward", "IndexBackward",
})
_MAX_HOPS = 16


def fed_by(index, node, position=0):
    """The node that produced the ``position``-th input of ``node``, looked through PASS_THROUGH ops; None when
    that input is a leaf, needs no gradient or its node is not in the document."""
    seen = 0
    inputs = node.get("inputs") or ()
    if len(inputs) <= position or not inputs[position] or inputs[position][0] is None:
        return None
    current = index.nodes.get(inputs[position][0])
    while current is not None and normalise_op(current.get("op")) in PASS_THROUGH and seen < _MAX_HOPS:
        seen += 1
        first = (current.get("inputs") or [[None, 0]])[0]
        current = index.nodes.get(first[0]) if first and first[0] is not None else None
    return current


def pairs(index, consumers, producer):
    """``(consumer node, producer node)`` for every node whose op is in ``consumers`` fed (first input) by a
    ``producer`` op, in node order."""
    found = []
    for node in index.nodes.values():
        if normalise_op(node.get("op")) not in consumers:
            continue
        source = fed_by(index, node)
        if source is not None and normalise_op(source.get("op")) == producer:
            found.append((node, source))
    return found


def module_of(index, node, cls):
    """The innermost module path of ``node`` when that module is an ``nn.<cls>`` (``model.3`` for an
    ``nn.Softmax`` in a Sequential), else None: the op was a functional call."""
    stack = node.get("module") or ()
    if stack and index.modules.get(stack[-1]) == cls:
        return stack[-1]
    return None


def loss_module(index, node, classes):
    """The loss module (``criterion``, an ``nn.CrossEntropyLoss``…) whose call made ``node``, or None."""
    for path in reversed(node.get("module") or ()):
        if index.modules.get(path) in classes:
            return path
    return None
