"""``Adagrad`` (with learning-rate decay and an initial accumulator), PyTorch's update rule."""

import numpy as np

from .optimizer import Optimizer, bump_version, grads_with_decay, scalar_step, state_tensor


class Adagrad(Optimizer):
    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10,
                 foreach=None, *, maximize=False, differentiable=False, fused=None):
        for name, value in (("learning rate", lr), ("lr_decay value", lr_decay),
                            ("weight_decay value", weight_decay),
                            ("initial_accumulator_value value", initial_accumulator_value), ("epsilon value", eps)):
            if not 0.0 <= value:
                raise ValueError(f"Invalid {name}: {value}")
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach, maximize=maximize,
                        differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)
        # PyTorch fills the state when the optimizer is built, not at the first step
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(p)

    def _init_state(self, p):
        state = self.state[p]
        if not state:
            state["step"] = scalar_step()
            state["sum"] = state_tensor(np.full_like(p._data, self.defaults["initial_accumulator_value"]))
        return state

    def _update_group(self, group):
        lr, lr_decay = float(group["lr"]), float(group["lr_decay"])
        eps = float(group["eps"])
        for p, g in grads_with_decay(group):
            data = p._data
            state = self._init_state(p)
            state["step"]._data += 1
            step = float(state["step"]._data)
            clr = lr / (1 + (step - 1) * lr_decay)
            total = state["sum"]._data
            total += g * g
            data -= clr * (g / (np.sqrt(total) + eps))
            bump_version(p)
