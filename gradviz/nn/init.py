"""Weight initialisation, as ``torch.nn.init``: each function fills a tensor in place, under no_grad, from
gradviz's generator (``gradviz.manual_seed`` makes it reproducible), and returns the tensor."""

import math

import numpy as np

from ..autograd.grad_mode import no_grad
from ..factories import _rng

_GAIN_ONE = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
             "sigmoid")


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for a nonlinearity (PyTorch's table)."""
    if nonlinearity in _GAIN_ONE:
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor):
    if tensor.dim() < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive = int(np.prod(tensor.shape[2:])) if tensor.dim() > 2 else 1
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _fan(tensor, mode):
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _fill(tensor, values):
    """Write ``values`` into ``tensor`` in place (bumping its version) without recording a graph."""
    with no_grad():
        tensor.copy_(np.asarray(values, dtype=tensor.dtype))
    return tensor


def uniform_(tensor, a=0.0, b=1.0):
    return _fill(tensor, _rng().uniform(a, b, tuple(tensor.shape)))


def normal_(tensor, mean=0.0, std=1.0):
    return _fill(tensor, _rng().normal(mean, std, tuple(tensor.shape)))


def constant_(tensor, val):
    return _fill(tensor, np.full(tuple(tensor.shape), val))


def zeros_(tensor):
    return constant_(tensor, 0.0)


def ones_(tensor):
    return constant_(tensor, 1.0)


def xavier_uniform_(tensor, gain=1.0):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    bound = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -bound, bound)


def xavier_normal_(tensor, gain=1.0):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)))


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu"):
    if 0 in tuple(tensor.shape):
        return tensor  # PyTorch warns and leaves an empty tensor alone
    std = calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu"):
    if 0 in tuple(tensor.shape):
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))
    return normal_(tensor, 0.0, std)


__all__ = ["calculate_gain", "uniform_", "normal_", "constant_", "zeros_", "ones_", "xavier_uniform_",
           "xavier_normal_", "kaiming_uniform_", "kaiming_normal_"]


# ----- breadth2: trunc_normal_, orthogonal_, eye_ --------------------------------------------------------------
def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Normal(mean, std) restricted to [a, b], drawn by inverting the normal CDF on the interval's share of it
    (exactly that distribution, as PyTorch's redraw-until-inside gives; not PyTorch's numbers)."""
    import warnings

    from ..ops.math_special import erfinv_array

    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The distribution of values "
                      "may be incorrect.", stacklevel=2)

    def cdf(x):
        return (1.0 + math.erf((x - mean) / (std * math.sqrt(2.0)))) / 2.0

    low, high = cdf(a), cdf(b)
    u = _rng(generator).uniform(low, high, tuple(tensor.shape))
    values = mean + std * math.sqrt(2.0) * erfinv_array(np.clip(2.0 * u - 1.0, -1.0, 1.0))
    return _fill(tensor, np.clip(values, a, b))


def orthogonal_(tensor, gain=1, generator=None):
    """A (semi-)orthogonal matrix, scaled by ``gain``, over the tensor flattened to (rows, rest): the Q of a
    Gaussian matrix's QR with its signs fixed by R's diagonal, so it is uniformly distributed (Mezzadri)."""
    if tensor.dim() < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    flat = _rng(generator).normal(0.0, 1.0, (rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _fill(tensor, (gain * q).reshape(tuple(tensor.shape)))


def eye_(tensor):
    """The identity matrix (ones on the diagonal of a 2-D tensor)."""
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    return _fill(tensor, np.eye(*tuple(tensor.shape)))


__all__ += ["trunc_normal_", "orthogonal_", "eye_"]
