"""``Adam`` (with amsgrad and L2 weight decay) and ``AdamW`` (decoupled weight decay), PyTorch's rules."""

import math

import numpy as np

from .optimizer import Optimizer, bump_version, state_tensor


class Adam(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *,
                 foreach=None, maximize=False, capturable=False, differentiable=False, fused=None,
                 decoupled_weight_decay=False):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if eps < 0.0:
            raise ValueError(f"Invalid epsilon value: {eps}")
        for i, beta in enumerate(betas):
            if not 0.0 <= beta < 1.0:
                raise ValueError(f"Invalid beta parameter at index {i}: {beta}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        maximize=maximize, foreach=foreach, capturable=capturable, differentiable=differentiable,
                        fused=fused, decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    def _update_group(self, group):
        lr = float(group["lr"])
        beta1, beta2 = (float(b) for b in group["betas"])
        eps = float(group["eps"])
        decay = float(group["weight_decay"])
        for p in group["params"]:
            if p._grad is None:
                continue
            data = p._data
            g = p._grad._data
            if group["maximize"]:
                g = -g
            state = self.state[p]
            if not state:
                state["step"] = state_tensor(np.zeros((), dtype=np.float32))
                state["exp_avg"] = state_tensor(np.zeros_like(data))
                state["exp_avg_sq"] = state_tensor(np.zeros_like(data))
                if group["amsgrad"]:
                    state["max_exp_avg_sq"] = state_tensor(np.zeros_like(data))
            state["step"]._data += 1
            step = float(state["step"]._data)
            if decay != 0:
                if group["decoupled_weight_decay"]:
                    data *= 1 - lr * decay
                else:
                    g = g + decay * data
            m = state["exp_avg"]._data
            v = state["exp_avg_sq"]._data
            m += (1 - beta1) * (g - m)
            v *= beta2
            v += (1 - beta2) * g * g
            if group["amsgrad"]:
                v_max = state["max_exp_avg_sq"]._data
                np.maximum(v_max, v, out=v_max)
                v = v_max
            denom = np.sqrt(v) / math.sqrt(1 - beta2 ** step) + eps
            data -= (lr / (1 - beta1 ** step)) * (m / denom)
            bump_version(p)


class AdamW(Adam):
    """Adam with weight decay applied to the parameters directly (decoupled), default weight_decay=1e-2."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False, foreach=None, capturable=False, differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach, maximize=maximize,
                         capturable=capturable, differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)
