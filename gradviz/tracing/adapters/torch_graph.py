"""PyTorch's autograd graph, read without keeping it alive: node identity, new nodes, saved tensors.

A node wrapper (``out.grad_fn``) keeps the node and its saved tensors alive, cannot be weakly referenced, and
``id()`` of a wrapper is reused, so nodes are never held. Each node we know carries a ``NodeTag`` in its
``metadata`` dict: our id, and, through a weak reference to the tag, a callback when the node dies. The tag is
also the node's backward prehook (it reports the gradient the node received).
"""

import weakref

KEY = "gradviz"  # the key of our tag in node.metadata


class NodeTag:
    """Stored in ``node.metadata[KEY]``; lives exactly as long as the node. Called by autograd as the node's
    prehook with the gradients it is about to receive."""

    __slots__ = ("id", "report", "owner", "leaf", "__weakref__")

    def __init__(self, nid, report, owner):
        self.id = nid
        self.report = report  # report(id, grad_outputs)
        self.owner = owner  # the adapter that tagged the node (a tag from an earlier trace is not ours)
        self.leaf = None  # for a leaf's AccumulateGrad: a weak reference to the leaf

    def __call__(self, grad_outputs):
        self.report(self.id, grad_outputs)


def tag_of(node, owner):
    """``owner``'s tag on ``node``, or None when ``owner`` has not seen it."""
    tag = node.metadata.get(KEY)
    return tag if tag is not None and tag.owner is owner else None


def new_nodes(root, owner):
    """The nodes reachable from ``root`` through ``next_functions`` that ``owner`` has not tagged, inputs first
    (an op like ``F.cross_entropy`` builds two; a custom ``Function`` or a compiled region shows up as one)."""
    if tag_of(root, owner) is not None:
        return []
    order, pending, seen = [], [(root, False)], {id(root)}
    held = [root]  # ids are only stable while the wrappers are alive: hold them for the walk
    while pending:
        node, expanded = pending.pop()
        if expanded:
            order.append(node)
            continue
        pending.append((node, True))
        for child, _ in node.next_functions:
            if child is None or id(child) in seen or tag_of(child, owner) is not None:
                continue
            seen.add(id(child))
            held.append(child)
            pending.append((child, False))
    return order


def is_accumulator(node):
    return type(node).__name__ == "AccumulateGrad" or node.name() == "torch::autograd::AccumulateGrad"


def node_name(node):
    """PyTorch's own name for the node (``AddmmBackward0``); ``AccumulateGrad`` without its C++ namespace."""
    name = node.name()
    return name.rpartition("::")[2] if "::" in name else name


_saved_attrs = {}  # node class -> names of its raw saved-tensor attributes


def saved_attrs(node):
    cls = type(node)
    names = _saved_attrs.get(cls)
    if names is None:
        names = _saved_attrs[cls] = tuple(a for a in dir(node) if a.startswith("_raw_saved_"))
    return names


def saved_tensors(node):
    """``[(attribute, index, tensor)]`` for what the node saved; ``tensor`` is None once backward freed it.

    Read right after the op ran, so each tensor's ``_version`` is the version PyTorch saved it at."""
    found = []
    for attr in saved_attrs(node):
        try:
            value = getattr(node, attr)
        except RuntimeError:  # freed already
            continue
        if isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                found.append((attr, i, getattr(item, "data", None)))
        else:
            found.append((attr, 0, getattr(value, "data", None)))
    return found


def is_freed(node):
    """Whether backward released this node's saved tensors (its raw saved data reads as None)."""
    saved = saved_tensors(node)
    return bool(saved) and all(t is None for _, _, t in saved)


def storage_key(tensor):
    """What identifies a block of memory: (device, address of its storage), and that storage's size in bytes."""
    storage = tensor.untyped_storage()
    return (str(tensor.device), storage.data_ptr()), storage.nbytes()


class DeathWatch:
    """Weak references to node tags, each calling ``on_death(node id)`` when its node is freed."""

    def __init__(self, on_death):
        self._refs = {}
        self._on_death = on_death

    def watch(self, tag):
        refs = self._refs
        nid = tag.id
        on_death = self._on_death

        def died(_ref, nid=nid):
            refs.pop(nid, None)
            on_death(nid)

        refs[nid] = weakref.ref(tag, died)

    def alive(self, nid):
        return nid in self._refs

    def forget(self):
        self._refs.clear()
