"""``Adadelta``, PyTorch's update rule."""

import numpy as np

from .optimizer import Optimizer, bump_version, grads_with_decay, scalar_step, state_tensor


class Adadelta(Optimizer):
    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *, capturable=False,
                 maximize=False, differentiable=False):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize,
                        capturable=capturable, foreach=foreach, differentiable=differentiable)
        super().__init__(params, defaults)

    def _update_group(self, group):
        lr, rho = float(group["lr"]), float(group["rho"])
        eps = float(group["eps"])
        for p, g in grads_with_decay(group):
            data = p._data
            state = self.state[p]
            if not state:
                state["step"] = scalar_step()
                state["square_avg"] = state_tensor(np.zeros_like(data))
                state["acc_delta"] = state_tensor(np.zeros_like(data))
            state["step"]._data += 1
            square_avg, acc_delta = state["square_avg"]._data, state["acc_delta"]._data
            square_avg *= rho
            square_avg += (1 - rho) * (g * g)
            delta = np.sqrt(acc_delta + eps) / np.sqrt(square_avg + eps) * g
            acc_delta *= rho
            acc_delta += (1 - rho) * (delta * delta)
            data -= lr * delta
            bump_version(p)
