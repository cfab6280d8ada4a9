"""Gradient clipping: scale every gradient so their joint norm is at most ``max_norm``, or clamp each element."""

import warnings

import numpy as np

from ...autograd.variable import Variable


def _as_list(tensors):
    return [tensors] if isinstance(tensors, Variable) else list(tensors)


def _vector_norm(array, p):
    """The p-norm of an array seen as one vector (p may be inf, -inf or 0, as in ``torch.linalg.vector_norm``)."""
    a = np.abs(array.reshape(-1))
    if p == float("inf"):
        return a.max() if a.size else array.dtype.type(0)
    if p == float("-inf"):
        return a.min() if a.size else array.dtype.type(float("inf"))
    if p == 0:
        return array.dtype.type(np.count_nonzero(a))
    if p == 1:
        return a.sum()
    if p == 2:
        return np.sqrt(np.dot(a, a))
    return np.power(np.power(a, p).sum(), 1.0 / p)


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The norm of all ``tensors`` together, as if concatenated into one vector (a 0-d tensor)."""
    tensors = _as_list(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return Variable(np.array(0.0, dtype=np.float32))
    dtype = tensors[0].dtype
    norms = np.array([_vector_norm(t._data, norm_type) for t in tensors], dtype=dtype)
    total = np.asarray(_vector_norm(norms, norm_type), dtype=dtype)
    if error_if_nonfinite and not np.isfinite(total):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, "
                           "so it cannot be clipped. To disable this error and scale the gradients by the "
                           "non-finite norm anyway, set `error_if_nonfinite=False`")
    return Variable(total)


def _scale_in_place(grad, factor):
    """Multiply a .grad by ``factor`` in place (PyTorch's ``mul_``), bumping its version."""
    data = grad._data
    if data.flags.writeable:
        data *= factor.astype(data.dtype)
    else:  # a read-only gradient array (e.g. a broadcast): replace it
        grad._data = data * factor.astype(data.dtype)
    grad._vc.value += 1


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scale the gradients by ``min(max_norm / (total_norm + 1e-6), 1)``, in place."""
    grads = [p.grad for p in _as_list(parameters) if p.grad is not None]
    if not grads:
        return
    total = total_norm._data if isinstance(total_norm, Variable) else np.asarray(total_norm)
    coef = np.minimum(np.asarray(max_norm, dtype=total.dtype) / (total + 1e-6), 1.0)
    for g in grads:
        _scale_in_place(g, coef)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Clip the gradients' joint norm to ``max_norm`` in place; returns the norm before clipping."""
    parameters = _as_list(parameters)
    grads = [p.grad for p in parameters if p.grad is not None]
    total = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(parameters, max_norm, total, foreach)
    return total


def clip_grad_norm(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    warnings.warn("`torch.nn.utils.clip_grad_norm` is now deprecated in favor of "
                  "`torch.nn.utils.clip_grad_norm_`.", FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp every gradient element to ``[-clip_value, clip_value]``, in place."""
    clip_value = float(clip_value)
    for p in _as_list(parameters):
        g = p.grad
        if g is None:
            continue
        data = g._data
        if data.flags.writeable:
            np.clip(data, -clip_value, clip_value, out=data)
        else:
            g._data = np.clip(data, -clip_value, clip_value)
        g._vc.value += 1
