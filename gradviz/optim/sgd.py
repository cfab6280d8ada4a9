"""``SGD`` with momentum, dampening, Nesterov momentum and weight decay (PyTorch's update rule)."""

import numpy as np

from .optimizer import Optimizer, bump_version, grads_with_decay, state_tensor


class SGD(Optimizer):
    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *,
                 maximize=False, foreach=None, differentiable=False, fused=None):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize, foreach=foreach, differentiable=differentiable,
                        fused=fused)
        super().__init__(params, defaults)

    def _update_group(self, group):
        lr = float(group["lr"])
        momentum = float(group["momentum"])
        dampening = float(group["dampening"])
        for p, g in grads_with_decay(group):
            data = p._data
            if momentum != 0:
                state = self.state[p]
                buf = state.get("momentum_buffer")
                if buf is None:
                    buf = state["momentum_buffer"] = state_tensor(np.array(g, dtype=data.dtype, copy=True))
                else:
                    b = buf._data
                    b *= momentum
                    b += (1 - dampening) * g
                g = g + momentum * buf._data if group["nesterov"] else buf._data
            if lr != 0:
                data -= lr * g
            bump_version(p)
