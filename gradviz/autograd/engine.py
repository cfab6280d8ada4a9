"""Reverse-mode execution: walk the graph from the roots in dependency order, without recursion."""

from heapq import heapify, heappop, heappush

import numpy as np

from ..errors import NoGradFnError, NonScalarBackwardError, ShapeError, UnsupportedError
from . import observer
from .function import AccumulateGrad, _call_backward, _check_count, _edge, _sum_to_shape
from .variable import Variable

_observers = observer._observers


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulate the gradients of ``tensors`` into the leaves' ``.grad`` (``torch.autograd.backward``)."""
    _refuse_create_graph(create_graph)
    if inputs is not None:
        raise UnsupportedError("gradviz does not support backward(inputs=...); use autograd.grad instead",
                               torch_name="backward(inputs=...)")
    roots, grads = _roots_and_grads(tensors, grad_tensors)
    _run(roots, grads, bool(retain_graph), None)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, allow_unused=False):
    """Return the gradients of ``outputs`` with respect to ``inputs`` without touching ``.grad``."""
    _refuse_create_graph(create_graph)
    single = isinstance(inputs, Variable)
    inputs = (inputs,) if single else tuple(inputs)
    roots, grads = _roots_and_grads(outputs, grad_outputs)
    for i, v in enumerate(inputs):
        if not isinstance(v, Variable) or not v._requires_grad:
            raise RuntimeError(f"One of the differentiated Tensors does not require grad (input {i})")
    targets = {}
    for i, v in enumerate(inputs):
        targets.setdefault(_edge(v), []).append(i)
    captured = _run(roots, grads, bool(retain_graph), targets)
    result = []
    for i, v in enumerate(inputs):
        g = captured.get(i)
        if g is None and not allow_unused:
            raise RuntimeError(f"The differentiated Tensor at index {i} appears to not have been used in the "
                               "graph. Set allow_unused=True if this is the desired behavior.")
        result.append(None if g is None else _wrap(np.array(g, dtype=v._data.dtype, copy=True)))
    return tuple(result)


def _refuse_create_graph(create_graph):
    if create_graph:
        raise UnsupportedError("gradviz does not support higher-order gradients (create_graph=True)",
                               torch_name="create_graph=True")


def _roots_and_grads(tensors, grad_tensors):
    roots = [tensors] if isinstance(tensors, Variable) else list(tensors)
    if grad_tensors is None or isinstance(grad_tensors, Variable) or np.isscalar(grad_tensors):
        grad_tensors = [grad_tensors] * len(roots) if grad_tensors is None else [grad_tensors]
    grad_tensors = list(grad_tensors)
    if len(grad_tensors) != len(roots):
        raise RuntimeError(f"got {len(grad_tensors)} tensors and {len(roots)} gradients")
    grads = []
    for i, (root, g) in enumerate(zip(roots, grad_tensors)):
        if not root.requires_grad:  # the property: a stale view takes its base's history first
            raise _refused(roots, grad_tensors, NoGradFnError(i, root))
        if g is None:
            if root._data.size != 1:
                raise _refused(roots, grad_tensors, NonScalarBackwardError(root))
            grads.append(np.ones_like(root._data))
            continue
        data = g._data if isinstance(g, Variable) else np.asarray(g, dtype=root._data.dtype)
        if data.shape != root._data.shape:
            raise ShapeError(f"Mismatch in shape: grad_output[{i}] has a shape of {_size(data.shape)} and "
                             f"output[{i}] has a shape of {_size(root._data.shape)}.")
        grads.append(data)
    return roots, grads


def _size(shape):
    return f"torch.Size([{', '.join(str(d) for d in shape)}])"


def _refused(roots, grad_tensors, exc):
    """A backward refused before it started (no grad_fn, non-scalar root) is still a backward call that
    observers must see: the debugger explains exactly these. ``retain_graph`` is None: it never began."""
    obs = _observers.get()
    for o in obs:
        try:
            o.on_backward_begin(tuple(roots), tuple(grad_tensors), None, None)
        except Exception as failure:
            o.callback_failed("on_backward_begin", failure)
        try:
            o.on_backward_end(tuple(roots), exc)
        except Exception as failure:
            o.callback_failed("on_backward_end", failure)
    return exc


def _run(roots, root_grads, retain_graph, targets):
    """Execute backward. ``targets`` maps (node, output_nr) edges to ``autograd.grad`` input positions;
    when given, gradients are captured there and no leaf ``.grad`` is touched."""
    obs = _observers.get()
    if obs:
        for o in obs:
            try:
                o.on_backward_begin(tuple(roots), tuple(root_grads), retain_graph,
                                    None if targets is None else tuple(targets))
            except Exception as failure:
                o.callback_failed("on_backward_begin", failure)
    try:
        # Like PyTorch, backward produces inf/nan silently (the debugger's nan-inf check reports them).
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            captured = _execute(roots, root_grads, retain_graph, targets, obs)
    except BaseException as exc:
        if obs:
            for o in obs:
                try:
                    o.on_backward_end(tuple(roots), exc)
                except Exception as failure:
                    o.callback_failed("on_backward_end", failure)
        raise
    if obs:
        for o in obs:
            try:
                o.on_backward_end(tuple(roots), None)
            except Exception as failure:
                o.callback_failed("on_backward_end", failure)
    return captured


def _execute(roots, root_grads, retain_graph, targets, obs):
    buffers = {}  # node -> list of gradients, one per output
    owned = {}  # AccumulateGrad node -> True when its buffered gradient is an array only the engine holds
    edges = [_edge(r) for r in roots]
    for (node, nr), g in zip(edges, root_grads):
        _add(buffers, node, nr, g)
    deps = _dependencies([e[0] for e in edges])
    needed = _needed_nodes(deps, targets) if targets is not None else None
    captured = {}
    ready = [(-n._seq, n) for n in {e[0] for e in edges} if deps.get(n, 0) == 0]
    heapify(ready)
    while ready:
        _, node = heappop(ready)
        grads = buffers.pop(node, None)
        if grads is not None and node._pre_hooks:
            grads = _run_pre_hooks(node, grads)
        if grads is not None and node._retain:
            _retain_grads(node, grads)
        if targets is not None:
            for nr in range(len(grads) if grads is not None else 0):
                for pos in targets.get((node, nr), ()):
                    captured[pos] = grads[nr]
        run = grads is not None and (needed is None or node in needed)
        if node.__class__ is AccumulateGrad:
            if run and targets is None:
                # a pre-hook saw the array (and may keep it, or have replaced it): then it is not the engine's
                _accumulate(node.variable, grads[0], obs, owned.pop(node, False) and not node._pre_hooks)
            continue
        if run:
            if len(grads) > 1 and any(g is None for g in grads):
                grads = [np.zeros(*node._out_meta(i)) if g is None else g for i, g in enumerate(grads)]
            if node._raw:
                results = node.backward(node, *grads)
                if results.__class__ is not tuple:
                    results = (results,)
                if len(results) != len(node._next):
                    results = _check_count(node, results)
            else:
                results = _call_backward(node, grads)
            if obs:
                for o in obs:
                    try:
                        o.on_backward_step(node, tuple(grads), results)
                    except Exception as failure:
                        o.callback_failed("on_backward_step", failure)
        else:
            results = (None,) * len(node._next)
        in_meta = node._in_meta
        for i, edge in enumerate(node._next):
            if edge is None:
                continue
            child = edge[0]
            if child is None:
                continue
            g = results[i]
            if g is not None:
                shape, dtype = in_meta[i]
                if g.__class__ is not np.ndarray or g.shape != shape:
                    g = _sum_to_shape(g, shape, node, i)
                if g.dtype != dtype:
                    g = g.astype(dtype)
                slot = buffers.get(child)
                if slot is None:
                    slot = buffers[child] = [None] * child._n_outputs
                prev = slot[edge[1]]
                if prev is None:
                    slot[edge[1]] = g
                    if child.__class__ is AccumulateGrad:
                        owned[child] = run and _made_by(node, g, i, results, grads)
                else:
                    slot[edge[1]] = prev + g
                    if child.__class__ is AccumulateGrad:
                        owned[child] = True  # the sum is a new array
            left = deps[child] - 1
            deps[child] = left
            if left == 0:
                heappush(ready, (-child._seq, child))
        if run and not retain_graph:
            if obs:
                node.release()
            else:  # the same as release(), minus the observer check
                node._saved = None
                node._freed = True
    return captured


def _add(buffers, node, nr, grad):
    slot = buffers.get(node)
    if slot is None:
        slot = buffers[node] = [None] * node._n_outputs
    prev = slot[nr]
    slot[nr] = grad if prev is None else prev + grad


def _dependencies(starts):
    """How many graph edges point at each node reachable from ``starts`` (iterative: no recursion limit)."""
    deps = {}
    seen = set()
    stack = [n for n in starts if n is not None]
    for n in stack:
        deps.setdefault(n, 0)
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        for edge in node._next:
            if edge is None or edge[0] is None:
                continue
            child = edge[0]
            deps[child] = deps.get(child, 0) + 1
            if child not in seen:
                stack.append(child)
    return deps


def _needed_nodes(deps, targets):
    """For ``autograd.grad``: the nodes from which some target can be reached (the rest are skipped)."""
    target_nodes = {node for node, _ in targets}
    children = {n: [e[0] for e in n._next if e is not None and e[0] is not None] for n in deps}
    needed = target_nodes & deps.keys()
    # An op node is created after the nodes of its inputs, so creation order visits children first
    # (AccumulateGrad nodes are made lazily, but they have no children and are seeded above).
    for node in sorted(deps, key=lambda n: n._seq):
        if node in target_nodes or any(c in needed for c in children[node]):
            needed.add(node)
    return needed


def _run_pre_hooks(node, grads):
    grads = list(grads)
    for nr, hooks in node._pre_hooks.items():
        for handle, fn in list(hooks):
            if grads[nr] is None:
                continue
            grads[nr] = _call_hook(handle, fn, grads[nr])
    return grads


def _call_hook(handle, fn, grad):
    var = handle.variable()
    arg = _wrap(grad)
    result = fn(arg)
    obs = _observers.get()
    if obs:
        for o in obs:
            try:
                o.on_hook(var, fn, "call", grad=arg, result=result)
            except Exception as failure:
                o.callback_failed("on_hook", failure)
    if result is None:
        return grad
    data = result._data if isinstance(result, Variable) else np.asarray(result)
    if data.shape != grad.shape:
        raise RuntimeError(f"hook '{getattr(fn, '__name__', 'hook')}' has changed the size of value")
    return data


def _retain_grads(node, grads):
    for nr, ref in node._retain.items():
        var = ref()
        if var is not None and grads[nr] is not None and var._grad_fn is node:
            var._grad = _wrap(np.array(grads[nr], copy=True))


def _made_by(node, g, i, results, grads):
    """Whether ``g``, the gradient ``node``'s backward produced for its input ``i`` (reduced to the input's shape,
    cast to its dtype), is an array that node made and nobody else holds, which a leaf may keep as its ``.grad``
    without a copy (PyTorch steals such buffers too). Built-in ops' backwards return arrays they compute, or
    pass an incoming gradient on; a custom Function returns its own Variables' arrays, and CopySlices relays
    another node's. Not owned, so copied: a custom Function's or a relayed result, an incoming gradient passed
    on (it may be the user's, or a hook's), the same array routed to two inputs (an add), a view (its base
    is someone's), a read-only array. Observers are shown the arrays and keep none (``observer.py``)."""
    if not node._raw or node._relays_grads or g.__class__ is not np.ndarray or g.base is not None \
            or not g.flags.writeable:
        return False
    for k, other in enumerate(results):
        if other is g and k != i:
            return False
    for other in grads:
        if other is g:
            return False
    return True


def _accumulate(leaf, grad, obs, owned=False):
    if leaf._hooks:
        owned = False  # a hook may have kept the array it was handed
        for handle, fn in list(leaf._hooks.values()):
            grad = _call_hook(handle, fn, grad)
    if grad.dtype != leaf._data.dtype:
        grad = grad.astype(leaf._data.dtype)
    current = leaf._grad
    if current is None:
        g = Variable.__new__(Variable)
        g._init(grad if owned and grad.dtype == leaf._data.dtype else _copy_like(grad, leaf._data))
        leaf._grad = g
        if obs:
            for o in obs:
                try:
                    o.on_variable(g, "grad")
                except Exception as failure:
                    o.callback_failed("on_variable", failure)
    elif current._data.shape == grad.shape and current._data.flags.writeable:
        np.add(current._data, grad, out=current._data)
    else:
        current._data = current._data + grad
    if obs:
        for o in obs:
            try:
                o.on_accumulate(leaf, grad)
            except Exception as failure:
                o.callback_failed("on_accumulate", failure)


def _copy_like(grad, like):
    """A private copy of ``grad`` laid out like the parameter (as PyTorch does), so in-place updates stay fast."""
    out = np.empty_like(like)
    np.copyto(out, grad)
    return out


def _wrap(array):
    v = Variable.__new__(Variable)
    v._init(array if type(array) is np.ndarray else np.asarray(array))
    return v
