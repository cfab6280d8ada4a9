"""``spectral_norm`` / ``remove_spectral_norm``: divide a module's weight by its largest singular value,
estimated by power iteration (one step per training forward, the vectors ``<name>_u`` and ``<name>_v`` kept as
buffers), as PyTorch's hook-based form does. The gradient flows through the weight in the estimate, with
``u`` and ``v`` held constant."""

import numpy as np

from ...autograd.grad_mode import no_grad
from ...autograd.variable import Variable
from ...factories import _rng
from ..parameter import Parameter


def _normalized(x, eps):
    return x / max(float(np.linalg.norm(x)), eps)


class SpectralNorm:
    """The forward pre-hook that recomputes ``module.<name>`` as ``<name>_orig / sigma``."""

    def __init__(self, name="weight", n_power_iterations=1, dim=0, eps=1e-12):
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.name = name
        self.dim = dim
        self.n_power_iterations = n_power_iterations
        self.eps = eps

    def reshape_weight_to_matrix(self, weight):
        if self.dim != 0:
            weight = weight.permute(self.dim, *[d for d in range(weight.ndim) if d != self.dim])
        return weight.reshape(weight.shape[0], -1)

    def compute_weight(self, module, do_power_iteration):
        weight = getattr(module, self.name + "_orig")
        u_buf, v_buf = getattr(module, self.name + "_u"), getattr(module, self.name + "_v")
        matrix = self.reshape_weight_to_matrix(weight)
        if do_power_iteration:
            m = matrix._data
            for _ in range(self.n_power_iterations):  # in place, as PyTorch's normalize(..., out=v)
                v_buf._data[...] = _normalized(m.T @ u_buf._data, self.eps)
                u_buf._data[...] = _normalized(m @ v_buf._data, self.eps)
            u_buf._vc.value += 1
            v_buf._vc.value += 1
        u, v = u_buf._data.copy(), v_buf._data.copy()
        sigma = (matrix.matmul(Variable(v)) * Variable(u)).sum()
        return weight / sigma

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module, do_power_iteration=module.training))

    def remove(self, module):
        with no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        delattr(module, self.name)
        delattr(module, self.name + "_u")
        delattr(module, self.name + "_v")
        delattr(module, self.name + "_orig")
        module.register_parameter(self.name, Parameter(weight.detach()))


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    if dim is None:
        dim = 1 if type(module).__name__.startswith("ConvTranspose") else 0
    for hook in module._forward_pre_hooks.values():
        if isinstance(hook, SpectralNorm) and hook.name == name:
            raise RuntimeError(f"Cannot register two spectral_norm hooks on the same parameter {name}")
    fn = SpectralNorm(name, n_power_iterations, dim, eps)
    weight = module._parameters.get(name)
    if weight is None:
        raise ValueError(f"`SpectralNorm` cannot be applied as parameter `{name}` is None")
    h, w = fn.reshape_weight_to_matrix(weight).shape
    u = _normalized(_rng().normal(0, 1, h), eps).astype(weight.dtype)
    v = _normalized(_rng().normal(0, 1, w), eps).astype(weight.dtype)
    delattr(module, name)
    module.register_parameter(name + "_orig", weight)
    setattr(module, name, weight.detach())
    module.register_buffer(name + "_u", Variable(u))
    module.register_buffer(name + "_v", Variable(v))
    module.register_forward_pre_hook(fn)
    return module


def remove_spectral_norm(module, name="weight"):
    for key, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, SpectralNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            return module
    raise ValueError(f"spectral_norm of '{name}' not found in {module}")
