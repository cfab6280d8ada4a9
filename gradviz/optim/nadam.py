"""``NAdam`` (Adam with Nesterov momentum and a momentum-decay schedule) and ``RAdam`` (Adam with the variance of
the adaptive rate rectified), with PyTorch's update rules and state."""

import math

import numpy as np

from .optimizer import Optimizer, bump_version, scalar_step, state_tensor


def _check(lr, eps, betas, weight_decay):
    if not 0.0 <= lr:
        raise ValueError(f"Invalid learning rate: {lr}")
    if not 0.0 <= eps:
        raise ValueError(f"Invalid epsilon value: {eps}")
    for i, beta in enumerate(betas):
        if not 0.0 <= beta < 1.0:
            raise ValueError(f"Invalid beta parameter at index {i}: {beta}")
    if not 0.0 <= weight_decay:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")


def _decayed_grad(p, group, lr):
    """The gradient (negated when maximizing) with L2 decay added, or the parameter decayed in place (AdamW
    style) when ``decoupled_weight_decay``."""
    g = -p._grad._data if group["maximize"] else p._grad._data
    decay = float(group["weight_decay"])
    if decay != 0:
        if group["decoupled_weight_decay"]:
            p._data *= 1 - lr * decay
        else:
            g = g + decay * p._data
    return g


class NAdam(Optimizer):
    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False):
        _check(lr, eps, betas, weight_decay)
        if not 0.0 <= momentum_decay:
            raise ValueError(f"Invalid momentum_decay value: {momentum_decay}")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        momentum_decay=momentum_decay, decoupled_weight_decay=decoupled_weight_decay,
                        maximize=maximize, foreach=foreach, capturable=capturable, differentiable=differentiable)
        super().__init__(params, defaults)

    def _update_group(self, group):
        lr = float(group["lr"])
        beta1, beta2 = (float(b) for b in group["betas"])
        eps, momentum_decay = float(group["eps"]), float(group["momentum_decay"])
        for p in group["params"]:
            if p._grad is None:
                continue
            state = self.state[p]
            if not state:
                state["step"] = scalar_step()
                mu_product = scalar_step()
                mu_product._data += 1  # starts at 1, in the step's dtype as PyTorch keeps it
                state["mu_product"] = mu_product
                state["exp_avg"] = state_tensor(np.zeros_like(p._data))
                state["exp_avg_sq"] = state_tensor(np.zeros_like(p._data))
            state["step"]._data += 1
            step = float(state["step"]._data)
            g = _decayed_grad(p, group, lr)
            # the momentum schedule: mu_t now and mu_{t+1} for the Nesterov look-ahead
            mu = beta1 * (1.0 - 0.5 * 0.96 ** (step * momentum_decay))
            mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((step + 1) * momentum_decay))
            state["mu_product"]._data *= mu
            mu_product = float(state["mu_product"]._data)
            m, v = state["exp_avg"]._data, state["exp_avg_sq"]._data
            m += (1 - beta1) * (g - m)
            v *= beta2
            v += (1 - beta2) * g * g
            denom = np.sqrt(v / (1 - beta2 ** step)) + eps
            p._data += (-lr * (1.0 - mu) / (1.0 - mu_product)) * (g / denom)
            p._data += (-lr * mu_next / (1.0 - mu_product * mu_next)) * (m / denom)
            bump_version(p)


class RAdam(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, decoupled_weight_decay=False,
                 *, foreach=None, maximize=False, capturable=False, differentiable=False):
        _check(lr, eps, betas, weight_decay)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize, foreach=foreach,
                        capturable=capturable, differentiable=differentiable)
        super().__init__(params, defaults)

    def _update_group(self, group):
        lr = float(group["lr"])
        beta1, beta2 = (float(b) for b in group["betas"])
        eps = float(group["eps"])
        rho_inf = 2 / (1 - beta2) - 1  # the longest the approximated simple moving average gets
        for p in group["params"]:
            if p._grad is None:
                continue
            state = self.state[p]
            if not state:
                state["step"] = scalar_step()
                state["exp_avg"] = state_tensor(np.zeros_like(p._data))
                state["exp_avg_sq"] = state_tensor(np.zeros_like(p._data))
            state["step"]._data += 1
            step = float(state["step"]._data)
            g = _decayed_grad(p, group, lr)
            m, v = state["exp_avg"]._data, state["exp_avg_sq"]._data
            m += (1 - beta1) * (g - m)
            v *= beta2
            v += (1 - beta2) * g * g
            correction1, correction2 = 1 - beta1 ** step, 1 - beta2 ** step
            m_hat = m / correction1
            rho_t = rho_inf - 2 * step * beta2 ** step / correction2
            if rho_t > 5.0:  # the variance is tractable: rectify the adaptive rate
                rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
                adaptive = math.sqrt(correction2) / (np.sqrt(v) + eps)
                p._data -= m_hat * lr * adaptive * rect
            else:  # too early: plain momentum SGD
                p._data -= m_hat * lr
            bump_version(p)
