"""``RMSprop`` (with momentum and the centered variant), PyTorch's update rule."""

import numpy as np

from .optimizer import Optimizer, bump_version, grads_with_decay, scalar_step, state_tensor


class RMSprop(Optimizer):
    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        for name, value in (("learning rate", lr), ("epsilon value", eps), ("momentum value", momentum),
                            ("weight_decay value", weight_decay), ("alpha value", alpha)):
            if not 0.0 <= value:
                raise ValueError(f"Invalid {name}: {value}")
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                        weight_decay=weight_decay, capturable=capturable, foreach=foreach, maximize=maximize,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    def _update_group(self, group):
        lr, alpha, eps = float(group["lr"]), float(group["alpha"]), float(group["eps"])
        momentum = float(group["momentum"])
        for p, g in grads_with_decay(group):
            data = p._data
            state = self.state[p]
            if not state:
                state["step"] = scalar_step()
                state["square_avg"] = state_tensor(np.zeros_like(data))
                if momentum > 0:
                    state["momentum_buffer"] = state_tensor(np.zeros_like(data))
                if group["centered"]:
                    state["grad_avg"] = state_tensor(np.zeros_like(data))
            state["step"]._data += 1
            square_avg = state["square_avg"]._data
            square_avg *= alpha
            square_avg += (1 - alpha) * (g * g)
            if group["centered"]:
                grad_avg = state["grad_avg"]._data
                grad_avg += (1 - alpha) * (g - grad_avg)
                avg = np.sqrt(square_avg - grad_avg * grad_avg)
            else:
                avg = np.sqrt(square_avg)
            avg += eps
            if momentum > 0:
                buf = state["momentum_buffer"]._data
                buf *= momentum
                buf += g / avg
                data -= lr * buf
            else:
                data -= lr * (g / avg)
            bump_version(p)
