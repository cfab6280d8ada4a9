"""Normalisation layers as single nodes: batch norm, layer norm and group norm.

All three normalise ``x`` over some axes to ``xhat = (x - mean) * invstd`` and then scale and shift it. Their
backward shares one formula: with ``gy`` the gradient reaching ``xhat``,
``gx = invstd * (gy - mean(gy) - xhat * mean(gy * xhat))`` over the normalised axes.
"""

import numpy as np

from ..autograd.function import Function


def _normalize(x, axes, eps):
    mean = x.mean(axis=axes, keepdims=True)
    centered = x - mean
    var = (centered * centered).mean(axis=axes, keepdims=True)
    invstd = 1.0 / np.sqrt(var + eps)
    return centered * invstd, mean, var, invstd


def _xhat_grad(gy, xhat, invstd, axes):
    """The gradient reaching ``x`` through batch statistics computed over ``axes``."""
    return invstd * (gy - gy.mean(axis=axes, keepdims=True)
                     - xhat * (gy * xhat).mean(axis=axes, keepdims=True))


def _channel_shape(ndim):
    return (1, -1) + (1,) * (ndim - 2)


def _affine(xhat, weight, bias, shape=None):
    """``xhat * weight + bias``, either one optional, reshaped to ``shape`` (per channel) when given."""
    y = xhat if weight is None else xhat * (weight if shape is None else weight.reshape(shape))
    return y if bias is None else y + (bias if shape is None else bias.reshape(shape))


def _affine_grads(grad, xhat, need, axes):
    """The gradients of weight and bias (when asked for): ``grad * xhat`` and ``grad`` summed over ``axes``."""
    gw = (grad * xhat).sum(axis=axes) if len(need) > 1 and need[1] else None
    gb = grad.sum(axis=axes) if len(need) > 2 and need[2] else None
    return gw, gb


class BatchNorm(Function):
    """Per-channel (dim 1) normalisation over the batch and spatial dims in training, or with the given
    running statistics in eval. ``stats`` (a dict) receives the batch mean and biased variance so the caller
    can update its running averages (PyTorch's kernel does that in place)."""

    _raw = True

    @staticmethod
    def forward(ctx, x, weight=None, bias=None, running_mean=None, running_var=None, training=True, eps=1e-5,
                stats=None):
        shape = _channel_shape(x.ndim)
        axes = (0,) + tuple(range(2, x.ndim))
        if training:
            xhat, mean, var, invstd = _normalize(x, axes, eps)
            if stats is not None:
                stats["mean"], stats["var"] = mean.reshape(-1), var.reshape(-1)
        else:
            invstd = (1.0 / np.sqrt(running_var + eps)).astype(x.dtype, copy=False).reshape(shape)
            xhat = (x - running_mean.reshape(shape)) * invstd
        y = _affine(xhat, weight, bias, shape)
        need = ctx.needs_input_grad
        if any(need):
            ctx.save_for_backward(xhat, invstd, weight)
            ctx._norm = (axes, training)
        ctx._meta = {"training": training, "eps": eps}
        return np.asarray(y, dtype=x.dtype)

    @staticmethod
    def backward(ctx, grad):
        xhat, invstd, weight = ctx.saved_tensors
        axes, training = ctx._norm
        shape = _channel_shape(xhat.ndim)
        need = ctx.needs_input_grad
        gy = grad if weight is None else grad * weight.reshape(shape)
        gx = None
        if need[0]:
            gx = _xhat_grad(gy, xhat, invstd, axes) if training else gy * invstd
        return (gx, *_affine_grads(grad, xhat, need, axes))


class LayerNorm(Function):
    """Normalisation over the last ``len(normalized_shape)`` dims, with elementwise weight and bias."""

    _raw = True

    @staticmethod
    def forward(ctx, x, weight=None, bias=None, n_dims=1, eps=1e-5):
        axes = tuple(range(x.ndim - n_dims, x.ndim))
        xhat, _, _, invstd = _normalize(x, axes, eps)
        y = _affine(xhat, weight, bias)
        if any(ctx.needs_input_grad):
            ctx.save_for_backward(xhat, invstd, weight)
            ctx._norm = axes
        ctx._meta = {"normalized_dims": n_dims, "eps": eps}
        return np.asarray(y, dtype=x.dtype)

    @staticmethod
    def backward(ctx, grad):
        xhat, invstd, weight = ctx.saved_tensors
        axes = ctx._norm
        need = ctx.needs_input_grad
        lead = tuple(range(xhat.ndim - len(axes)))
        gx = _xhat_grad(grad if weight is None else grad * weight, xhat, invstd, axes) if need[0] else None
        return (gx, *_affine_grads(grad, xhat, need, lead))


class GroupNorm(Function):
    """Normalisation of each sample over groups of channels (and all spatial dims), then per-channel affine."""

    _raw = True

    @staticmethod
    def forward(ctx, x, weight=None, bias=None, num_groups=1, eps=1e-5):
        n = x.shape[0]
        grouped = x.reshape(n, num_groups, -1)
        xhat, _, _, invstd = _normalize(grouped, (2,), eps)
        xhat = xhat.reshape(x.shape)
        shape = _channel_shape(x.ndim)
        y = _affine(xhat, weight, bias, shape)
        if any(ctx.needs_input_grad):
            ctx.save_for_backward(xhat, invstd, weight)
            ctx._norm = num_groups
        ctx._meta = {"num_groups": num_groups, "eps": eps}
        return np.asarray(y, dtype=x.dtype)

    @staticmethod
    def backward(ctx, grad):
        xhat, invstd, weight = ctx.saved_tensors
        groups = ctx._norm
        need = ctx.needs_input_grad
        shape = _channel_shape(xhat.ndim)
        axes = (0,) + tuple(range(2, xhat.ndim))
        gx = None
        if need[0]:
            gy = (grad if weight is None else grad * weight.reshape(shape)).reshape(xhat.shape[0], groups, -1)
            gx = _xhat_grad(gy, xhat.reshape(gy.shape), invstd, (2,)).reshape(xhat.shape)
        return (gx, *_affine_grads(grad, xhat, need, axes))
