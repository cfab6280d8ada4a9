"""Activation modules: ``ReLU``, ``Sigmoid``, ``Tanh``, ``Softmax``, ``LogSoftmax``, ``GELU``, ``SiLU``,
``LeakyReLU``, ``ELU``, ``Softplus``, ``Hardtanh``, ``ReLU6``, ``SELU``, ``CELU``, ``Mish``, ``Hardswish``,
``Hardsigmoid``, ``LogSigmoid``, ``Softsign``, ``Tanhshrink``, ``Threshold``, ``GLU``, ``PReLU``."""

import numpy as np

from ...dtypes import as_dtype
from .. import functional as F
from .. import init as nn_init
from ..module import Module
from ..parameter import Parameter


class ReLU(Module):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.relu(input, inplace=self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class Sigmoid(Module):
    def forward(self, input):
        return input.sigmoid()


class Tanh(Module):
    def forward(self, input):
        return input.tanh()


class Softmax(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmax(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.log_softmax(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


# ----- issue 8: GELU, SiLU, LeakyReLU, ELU, Softplus, Hardtanh, ReLU6 ----------------------------------------
class GELU(Module):
    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class SiLU(Module):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.silu(input, inplace=self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class LeakyReLU(Module):
    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class ELU(Module):
    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input):
        return F.elu(input, self.alpha, self.inplace)

    def extra_repr(self):
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class Softplus(Module):
    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


class Hardtanh(Module):
    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False):
        super().__init__()
        if max_val <= min_val:
            raise AssertionError(f"max_val ({max_val}) must be greater than min_val ({min_val})")
        self.min_val = min_val
        self.max_val = max_val
        self.inplace = inplace

    def forward(self, input):
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}" + (", inplace=True" if self.inplace else "")


class ReLU6(Hardtanh):
    def __init__(self, inplace=False):
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


# ----- SELU, CELU, Mish, Hardswish, Hardsigmoid, LogSigmoid, Softsign, Tanhshrink, Threshold, GLU, PReLU --------
class _InplaceActivation(Module):
    """An activation whose only option is ``inplace``; subclasses name their functional form."""

    _fn = None

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return type(self)._fn(input, inplace=self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class SELU(_InplaceActivation):
    _fn = staticmethod(F.selu)


class Mish(_InplaceActivation):
    _fn = staticmethod(F.mish)


class Hardswish(_InplaceActivation):
    _fn = staticmethod(F.hardswish)

    def extra_repr(self):
        return ""


class Hardsigmoid(_InplaceActivation):
    _fn = staticmethod(F.hardsigmoid)

    def extra_repr(self):
        return ""


class CELU(Module):
    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input):
        return F.celu(input, self.alpha, self.inplace)

    def extra_repr(self):
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class LogSigmoid(Module):
    def forward(self, input):
        return F.logsigmoid(input)


class Softsign(Module):
    def forward(self, input):
        return F.softsign(input)


class Tanhshrink(Module):
    def forward(self, input):
        return F.tanhshrink(input)


class Threshold(Module):
    def __init__(self, threshold, value, inplace=False):
        super().__init__()
        self.threshold = threshold
        self.value = value
        self.inplace = inplace

    def forward(self, input):
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self):
        return f"threshold={self.threshold}, value={self.value}" + (", inplace=True" if self.inplace else "")


class GLU(Module):
    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.glu(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class PReLU(Module):
    """LeakyReLU with a learnable slope: one shared (``num_parameters=1``) or one per channel (dim 1)."""

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters = num_parameters
        self.init = init
        self.weight = Parameter(np.full(num_parameters, init, dtype=as_dtype(dtype) or np.dtype(np.float32)))

    def reset_parameters(self):
        nn_init.constant_(self.weight, self.init)

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"


class Softmin(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmin(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class Softmax2d(Module):
    """Softmax over the channels (dim -3) of a (N, C, H, W) or (C, H, W) input."""

    def forward(self, input):
        if input.ndim not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {input.ndim}D instead")
        return F.softmax(input, -3)
