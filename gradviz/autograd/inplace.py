"""In-place ops: compute with the op's ordinary forward, write the result into the target's storage, bump the
shared version counter, and rewrite the graph so the target (and, through a view, its base) gets the op as
its history — PyTorch's semantics, including ``CopySlices`` for writes through views."""

import numpy as np

from ..errors import LeafInplaceError, ShapeError
from . import grad_mode, observer
from .function import CopySlices, _refresh_view_history, multi_view_message
from .variable import Variable

_grad_enabled = grad_mode._grad_enabled
_observers = observer._observers


def apply_inplace(cls, target, *args, **kwargs):
    """Run ``cls`` on ``(target, *args)`` and store the result in ``target``; returns ``target``."""
    op_name = cls.__name__.lower() + "_"
    grad_on = _grad_enabled.get()
    base = target._base
    if grad_on:
        if target._requires_grad and target._grad_fn is None and base is None:
            raise LeafInplaceError(target, op_name)
        if base is not None and base._requires_grad and base._grad_fn is None:
            raise LeafInplaceError(target, op_name, through_view=True)
        if base is not None and target._requires_grad:
            _refuse_multi_view_output(target)
    storage = target._data
    if not storage.flags.writeable or (0 in storage.strides and storage.size > 1 and _overlaps(storage)
                                       and not _harmless_overlap(cls, args, storage)):
        raise RuntimeError("unsupported operation: more than one element of the written-to tensor refers to a "
                           "single memory location. Please clone() the tensor before performing the operation.")
    for a in args:
        if isinstance(a, Variable) and _partial_overlap(a._data, storage):
            raise RuntimeError("unsupported operation: some elements of the input tensor and the written-to tensor "
                               "refer to a single memory location. Please clone() the tensor before performing "
                               "the operation.")

    result = cls.apply(target, *args, **kwargs)
    if result._data.shape != storage.shape:
        raise ShapeError(f"output with shape {list(storage.shape)} doesn't match the broadcast shape "
                         f"{list(result._data.shape)}")
    node = result._grad_fn
    if node is not None and node._saved:
        _detach_saved_target(node, target)
    old = target._vc.value
    try:
        np.copyto(storage, result._data, casting="same_kind")
    except TypeError:
        raise RuntimeError(f"result type {_torch_type(result._data.dtype)} can't be cast to the desired output "
                           f"type {_torch_type(storage.dtype)}") from None
    target._vc.value = old + 1
    if node is not None:
        _point_saved_output_at(node, target)
        _rewrite_history(target, node)
    obs = _observers.get()
    if obs:
        for o in obs:
            try:
                o.on_inplace(target, node, old, old + 1)
            except Exception as failure:
                o.callback_failed("on_inplace", failure)
    return target


def _refuse_multi_view_output(target):
    """PyTorch refuses in-place writes to (views of) one output of an op that returns several views (split,
    chunk, unbind): their shared backward cannot take a rewritten history."""
    chain = target._view_chain
    if any(getattr(cls, "_multi_view", None) for cls, _ in chain):
        raise RuntimeError(multi_view_message(chain, "is being modified inplace"))


def _harmless_overlap(cls, args, storage):
    """Writes PyTorch allows into memory that several elements share: one value (fill_, zero_), or a tensor
    copied onto itself (copy_ of the very same layout is a no-op)."""
    if cls.__name__ == "Fill":
        return True
    return cls.__name__ == "Copy" and isinstance(args[0], Variable) and _same_layout(args[0]._data, storage)


def _same_layout(a, b):
    return (a.__array_interface__["data"][0] == b.__array_interface__["data"][0] and a.shape == b.shape
            and a.strides == b.strides)


def _partial_overlap(a, b):
    """PyTorch's rule: an input that shares some but not all of the written memory is refused when both are dense
    (it cannot tell for strided layouts, and lets those through); the very same layout is fine (``x.mul_(x)``)."""
    if not np.may_share_memory(a, b):
        return False
    return not _same_layout(a, b) and _dense(a) and _dense(b)


def _dense(array):
    """Non-overlapping and dense: the elements fill ``nbytes`` contiguous bytes, in some order of the dims."""
    step = array.itemsize
    for stride, size in sorted((st, n) for st, n in zip(array.strides, array.shape) if n != 1):
        if stride != step:
            return False
        step *= size
    return True


def _overlaps(array):
    return any(st == 0 and n > 1 for st, n in zip(array.strides, array.shape))


def _detach_saved_target(node, target):
    """The target's old values are about to be overwritten: give the node its own copy of them (PyTorch's
    ``original_self``). One copy only: in ``x.mul_(x)`` the target was saved a second time as the other
    operand, and that record keeps its version, so backward reports it modified, as PyTorch does."""
    saved = list(node._saved)
    for k, s in enumerate(saved):
        if s.kind == "input" and s.variable is target:
            saved[k] = type(s)(s.data.copy(), None, 0, None, "buffer", s.index)
            break
    node._saved = tuple(saved)


def _point_saved_output_at(node, target):
    """A saved *output* now lives in the target's storage, at the version just written."""
    if any(s.kind == "output" for s in node._saved or ()):
        node._saved = tuple(
            type(s)(target._data, target._vc, target._vc.value, None, "output", s.index)
            if s.kind == "output" else s
            for s in node._saved
        )


def _rewrite_history(target, node):
    base = target._base
    if base is not None:
        # The base's history now goes through the write; the view's becomes a view of that (PyTorch makes it
        # AsStridedBackward of CopySlices), so the write's node is reached once, through CopySlices only.
        base._grad_fn = CopySlices(base, node, target._view_chain)
        base._output_nr = 0
        base._requires_grad = True
        _refresh_view_history(target)
        return
    target._grad_fn = node
    target._output_nr = 0
    target._requires_grad = True


def _torch_type(dtype):
    return {"float32": "Float", "float64": "Double", "int64": "Long", "bool": "Bool"}.get(str(dtype), str(dtype))


__all__ = ["apply_inplace", "Variable"]
