"""Small op fields read from a PyTorch node's saved attributes, for the document's ``meta`` (gradviz's engine
records them itself): the softmax dimension, which softmax-wrong-dim reads. A dict lookup per recorded node."""

_DIM = {"SoftmaxBackward0", "LogSoftmaxBackward0"}


def op_meta(node, name):
    """``{"dim": d}`` for a softmax or log-softmax node (``d`` as given, possibly negative), else None."""
    if name not in _DIM:
        return None
    dim = getattr(node, "_saved_dim", None)
    return None if not isinstance(dim, int) else {"dim": dim}
