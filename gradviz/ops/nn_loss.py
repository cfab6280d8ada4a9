"""More losses behind ``gradviz.nn``: BCE with logits, smooth L1, Huber and KL divergence. Each is one node with
forward and backward side by side; input and target both get gradients when they need them."""

import numpy as np

from ..autograd.function import Function
from .nn_ops import _reduce, _spread


def _softplus_neg(x):
    """``log(1 + exp(-x))`` without overflow."""
    return np.maximum(-x, 0) + np.log1p(np.exp(-np.abs(x)))


def _sigmoid(x):
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x))


class BinaryCrossEntropyWithLogits(Function):
    """``-w (p t log sigmoid(x) + (1 - t) log(1 - sigmoid(x)))`` computed from the logits, stably, with
    ``p`` the per-class ``pos_weight``."""

    _raw = True

    @staticmethod
    def forward(ctx, x, target, weight=None, pos_weight=None, reduction="mean"):
        sp = _softplus_neg(x)  # -log sigmoid(x)
        if pos_weight is None:
            loss = (1 - target) * x + sp
        else:
            loss = (1 - target) * x + ((pos_weight - 1) * target + 1) * sp
        if weight is not None:
            loss = loss * weight
        if ctx.needs_input_grad[0] or ctx.needs_input_grad[1]:
            ctx.save_for_backward(x, target, weight, pos_weight)
        ctx._reduction = reduction
        ctx._meta = {"reduction": reduction}
        return _reduce(np.asarray(loss, dtype=x.dtype), reduction)

    @staticmethod
    def backward(ctx, grad):
        x, target, weight, pos_weight = ctx.saved_tensors
        g = _spread(grad, np.broadcast_shapes(x.shape, np.shape(target)), ctx._reduction)
        if weight is not None:
            g = g * weight
        gx = gt = None
        if ctx.needs_input_grad[0]:
            if pos_weight is None:
                gx = g * (_sigmoid(x) - target)
            else:  # (1 - t) - (1 + (p - 1) t) sigmoid(-x)
                gx = g * ((1 - target) - ((pos_weight - 1) * target + 1) * _sigmoid(-x))
        if ctx.needs_input_grad[1]:
            gt = g * (-x if pos_weight is None else -x + (pos_weight - 1) * _softplus_neg(x))
        return gx, gt


class _DiffLoss(Function):
    """A loss of ``d = input - target`` alone, quadratic near 0 and linear beyond a threshold; subclasses give
    the loss and its slope, and a forward that names the threshold (a keyword, so it is not an input).
    d/dtarget is -d/dinput."""

    _raw = True

    @classmethod
    def _forward(cls, ctx, x, target, reduction, threshold_name, threshold):
        diff = np.subtract(x, target)
        if ctx.needs_input_grad[0] or ctx.needs_input_grad[1]:
            ctx.save_for_backward(diff)
        ctx._params = (reduction, threshold)
        ctx._meta = {"reduction": reduction, threshold_name: threshold}
        return _reduce(np.asarray(cls.loss(diff, threshold), dtype=diff.dtype), reduction)

    @classmethod
    def backward(cls, ctx, grad):
        (diff,) = ctx.saved_tensors
        reduction, threshold = ctx._params
        g = np.asarray(cls.slope(diff, threshold) * _spread(grad, diff.shape, reduction), dtype=diff.dtype)
        return g, (-g if ctx.needs_input_grad[1] else None)


class SmoothL1Loss(_DiffLoss):
    """``0.5 d^2 / beta`` where ``|d| < beta``, ``|d| - beta / 2`` elsewhere (``d = input - target``)."""

    @classmethod
    def forward(cls, ctx, x, target, reduction="mean", beta=1.0):
        return cls._forward(ctx, x, target, reduction, "beta", beta)

    @staticmethod
    def loss(diff, beta):
        a = np.abs(diff)
        return np.where(a < beta, 0.5 * diff * diff / beta if beta else 0, a - 0.5 * beta)

    @staticmethod
    def slope(diff, beta):
        return np.where(np.abs(diff) < beta, diff / beta if beta else 0, np.sign(diff))


class HuberLoss(_DiffLoss):
    """``0.5 d^2`` where ``|d| < delta``, ``delta (|d| - delta / 2)`` elsewhere."""

    @classmethod
    def forward(cls, ctx, x, target, reduction="mean", delta=1.0):
        return cls._forward(ctx, x, target, reduction, "delta", delta)

    @staticmethod
    def loss(diff, delta):
        a = np.abs(diff)
        return np.where(a < delta, 0.5 * diff * diff, delta * (a - 0.5 * delta))

    @staticmethod
    def slope(diff, delta):
        return np.clip(diff, -delta, delta)


class KlDiv(Function):
    """Pointwise ``t (log t - x)`` (``x`` is a log-probability; ``t`` a probability, or with ``log_target`` a
    log-probability: ``exp(t) (t - x)``); ``t = 0`` contributes 0, as ``xlogy`` does."""

    _raw = True

    @staticmethod
    def forward(ctx, x, target, reduction="mean", log_target=False):
        if log_target:
            loss = np.exp(target) * (target - x)
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                loss = np.where(target == 0, 0, target * np.log(target)) - target * x
        if ctx.needs_input_grad[0] or ctx.needs_input_grad[1]:
            ctx.save_for_backward(x, target)
        ctx._params = (reduction, log_target)
        ctx._meta = {"reduction": reduction, "log_target": log_target}
        return _reduce(np.asarray(loss, dtype=np.result_type(x, target)), reduction)

    @staticmethod
    def backward(ctx, grad):
        x, target = ctx.saved_tensors
        reduction, log_target = ctx._params
        g = _spread(grad, np.broadcast_shapes(np.shape(x), np.shape(target)), reduction)
        gx = gt = None
        if ctx.needs_input_grad[0]:
            gx = -g * (np.exp(target) if log_target else target)
        if ctx.needs_input_grad[1]:
            if log_target:
                gt = g * np.exp(target) * (target - x + 1)
            else:
                # At t = 0 the derivative (log t + 1 - x) is unbounded; PyTorch gives nan there, and so do we.
                with np.errstate(divide="ignore", invalid="ignore"):
                    gt = g * np.where(target == 0, np.nan, np.log(target) + 1 - x)
        return gx, gt
