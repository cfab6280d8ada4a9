"""PyTorch's autograd graph, read without keeping it alive: node identity, new nodes, saved tensors.

A node wrapper (``out.grad_fn``) keeps the node and its saved tensors alive, cannot be weakly referenced, and
``id()`` of a wrapper is reused, so nodes are never held. Each node we know carries a ``NodeTag`` in its
``metadata`` dict: our key for it, and, through a weak reference to the tag, a callback when the node dies.
The tag is also the node's backward prehook (it reports the gradient the node is about to receive).
"""

from .compat import read_data

KEY = "gradviz"  # the key of our tag in node.metadata

# how this torch's saved tensors are read (torch/compat; ``configure`` sets them for the torch being traced)
_saved_attr = None  # _raw_saved_X -> the attribute to read, or None: read _raw_saved_X itself
read_saved = read_data  # (node, attribute) -> [(index, tensor or None: freed)], or None: unreadable


def configure(compat):
    """Read saved tensors the way ``compat`` (torch_compat.probe's answer) says this torch allows."""
    global _saved_attr, read_saved
    from . import compat as torch_compat

    _saved_attr = compat.saved_attr if compat.saved == "unpack" else None
    read_saved = torch_compat.read_unpacked if compat.saved == "unpack" else read_data
    _infos.clear()  # their saved attribute names depend on it


class NodeTag:
    """Stored in ``node.metadata[KEY]``; lives exactly as long as the node. Called by autograd as the node's
    prehook with the gradients it is about to receive."""

    __slots__ = ("id", "owner", "leaf", "spans", "__weakref__")

    def __init__(self, nid, owner):
        self.id = nid
        self.owner = owner  # the adapter that tagged the node (a tag from an earlier trace is not ours)
        self.leaf = None  # for a leaf's AccumulateGrad: a weak reference to the leaf
        # where its saved tensors live, for silent in-place writes (the node itself cannot be reached from here):
        # ``(storage key, first byte, end byte)`` per saved tensor, in the order of its saved facts
        self.spans = None

    def __call__(self, grad_outputs):
        owner = self.owner
        if owner._watch and self.id in owner._watch:  # numpy arrays handed out on what the node saved
            owner.check_watched(self.id)
        call = owner.backward_call
        if call is not None and owner.attached:
            call.visit(self.id, grad_outputs, None)


class NodeInfo:
    """What every node of one class shares: PyTorch's name (``AddmmBackward0``), the class name gradviz shows
    (a custom Function's own name), whether user code defined it, and its raw saved-tensor attributes."""

    __slots__ = ("name", "class_name", "custom", "saved", "accumulator")

    def __init__(self, node):
        name = node.name()
        self.accumulator = name == "torch::autograd::AccumulateGrad"
        self.name = name.rpartition("::")[2]
        forward_cls = getattr(type(node), "_forward_cls", None)
        if forward_cls is not None:
            self.custom = not (getattr(forward_cls, "__module__", "") or "").startswith("torch")
            self.class_name = forward_cls.__name__
        else:
            self.custom = False
            self.class_name = self.name
        saved = tuple(a for a in dir(node) if a.startswith("_raw_saved_"))
        self.saved = saved if _saved_attr is None else tuple(_saved_attr(a) for a in saved)


_infos = {}


def info(node):
    found = _infos.get(type(node))
    if found is None:
        found = _infos[type(node)] = NodeInfo(node)
    return found


def grad_fn_of(tensor):
    """``tensor.grad_fn``, or None where PyTorch refuses to read it: a view made under ``no_grad`` whose base was
    then changed in place (``nn.Embedding(padding_idx=...)`` zeroing its padding row) raises on the read, although
    the user's code never reads it; then there is no graph to report."""
    try:
        return tensor.grad_fn
    except RuntimeError:
        return None


def tag_of(node, owner):
    """``owner``'s tag on ``node``, or None when ``owner`` has not seen it."""
    tag = node.metadata.get(KEY)
    return tag if tag is not None and tag.owner is owner else None


def new_nodes(root, owner):
    """The nodes reachable from ``root`` through ``next_functions`` that ``owner`` has not tagged, inputs first
    (an op like ``F.cross_entropy`` builds two; a custom ``Function`` or a compiled region shows up as one)."""
    for child, _ in root.next_functions:  # the usual case: every input is known (or a leaf's accumulator)
        if child is not None:
            tag = child.metadata.get(KEY)  # (tag_of, inline: this loop runs for every call that built nodes)
            if tag is None or tag.owner is not owner:
                break
    else:
        return [root]
    order, pending, seen = [], [(root, False)], set()
    held = [root]  # ids are only stable while the wrappers are alive: hold them for the walk
    while pending:
        node, expanded = pending.pop()
        if expanded:
            order.append(node)
            continue
        # marked when expanded, not when pushed: a node reached again from a node expanded later must still come
        # before it (marked at push, GRU's graph came out with inputs after their users, reported twice)
        if id(node) in seen:
            continue
        seen.add(id(node))
        pending.append((node, True))
        for child, _ in node.next_functions:
            if child is None or id(child) in seen:
                continue
            tag = child.metadata.get(KEY)
            if tag is not None and tag.owner is owner:
                continue
            held.append(child)
            pending.append((child, False))
    return order


def saved_tensors(node, attrs):
    """``[(attribute, index, tensor)]`` for what the node saved; ``tensor`` is None once backward freed it. A value
    that is not readable as a tensor (``--exact-memory`` holds it packed) is left out: callers get tensors only.

    Read right after the op ran, so each tensor's ``_version`` is the version PyTorch saved it at."""
    found = []
    read = read_saved
    for attr in attrs:
        values = read(node, attr)
        if values is None:
            continue
        found.extend((attr, i, t) for i, t in values if t is None or hasattr(t, "is_floating_point"))
    return found


def is_freed(node):
    """Whether backward released this node's saved tensors (its raw saved data reads as None)."""
    saved = saved_tensors(node, info(node).saved)
    return bool(saved) and all(t is None for _, _, t in saved)


def storage_key(tensor):
    """What identifies a block of memory: (device, address of its storage), and that storage's size in bytes."""
    storage = tensor.untyped_storage()
    if tensor.is_cpu:  # (get_device() is -1 on the CPU; reading the device builds a torch.device)
        return ("cpu", -1, storage.data_ptr()), storage.nbytes()
    return (tensor.device.type, tensor.get_device(), storage.data_ptr()), storage.nbytes()


def span(t):
    """``(first byte, end byte)`` of the memory tensor ``t``'s elements can reach (the gaps of a strided view
    included)."""
    first = t.data_ptr()
    if not t.numel():
        return first, first
    last = 0
    for size, stride in zip(t.shape, t.stride()):
        last += (size - 1) * stride
    return first, first + (last + 1) * t.element_size()


def output_meta(node):
    """Shape and dtype name of a node's output, from the metadata of the gradient it expects."""
    try:
        meta = node._input_metadata[0]
        dtype = meta.dtype
        name = _dtype_names.get(dtype)
        if name is None:
            name = _dtype_names[dtype] = str(dtype).rpartition(".")[2]
        return tuple(meta.shape), name
    except (AttributeError, IndexError, RuntimeError, TypeError):
        return (), None


_dtype_names = {}  # torch.float32 -> "float32" (str() of a dtype is ~0.4 us; an op hiding a value asks per node)


def align_inputs(slots, edges_of_tensors, moved=True):
    """Which tensor argument feeds each of a node's inputs: ``[tensor index or None per slot]`` and the indices
    of the tensors that feed no slot (an index, a mask, a running mean).

    ``slots`` are the node's edges (``next_functions``: an edge per input, None where that input needs no
    gradient or was not given, as a ``bias=None``); ``edges_of_tensors`` the edge each argument would have (None
    for one that needs no gradient). An argument whose edge is a slot's edge feeds that slot (both slots of
    ``x * x``). The others are placed by argument order, which is the order of the slots: between two matched
    slots, the arguments without an edge fill the empty slots in turn, and an argument whose edge moved (an
    in-place op's target, now its own output) fills the slot whose edge matched nothing (not with ``moved``
    False: an inner node of a call, whose other inputs are nodes of the same call). Where there are more such
    arguments than slots between two matches, nothing is guessed."""
    first = {}
    for j, own in enumerate(edges_of_tensors):
        if own is not None and own not in first:
            first[own] = j
    fed = [first.get(edge) if edge is not None else None for edge in slots]
    matched = set(fed)
    matched.discard(None)
    if None not in fed or len(matched) == len(edges_of_tensors) or (not moved and (None not in slots or all(
            own is not None for own in edges_of_tensors))):
        # every input fed, every argument placed, or (an inner node) no empty input or no argument without a
        # gradient to fill one: nothing left to place
        return fed, [j for j in range(len(edges_of_tensors)) if j not in matched]
    placed = [j in matched for j in range(len(edges_of_tensors))]
    anchors = [(-1, -1)] + [(i, j) for i, j in enumerate(fed) if j is not None] + \
        [(len(slots), len(edges_of_tensors))]
    for (i0, j0), (i1, j1) in zip(anchors, anchors[1:]):
        if j1 < j0:  # matched out of argument order (a keyword argument): the gap has no order to go by
            continue
        for needs_grad in (False, True) if moved else (False,):
            empty = [i for i in range(i0 + 1, i1) if fed[i] is None and (slots[i] is not None) == needs_grad]
            free = [j for j in range(j0 + 1, j1) if not placed[j] and (edges_of_tensors[j] is not None) == needs_grad]
            if free and len(free) <= len(empty):
                for i, j in zip(empty, free):
                    fed[i], placed[j] = j, True
    # the node takes its inputs in another order than the call its arguments (addmm: bias first, for
    # ``F.linear(x, weight, bias)``): what is left is placed in order when it fits
    for needs_grad in (False, True) if moved else (False,):
        empty = [i for i, j in enumerate(fed) if j is None and (slots[i] is not None) == needs_grad]
        free = [j for j, own in enumerate(edges_of_tensors) if not placed[j] and (own is not None) == needs_grad]
        if free and len(free) <= len(empty):
            for i, j in zip(empty, free):
                fed[i], placed[j] = j, True
    return fed, [j for j, done in enumerate(placed) if not done]
