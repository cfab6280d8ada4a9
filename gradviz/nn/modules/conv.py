"""``Conv2d``, ``Conv1d`` and ``ConvTranspose2d``: (transposed) cross-correlation with stride, padding,
dilation and bias (groups=1)."""

import math

import numpy as np

from ...dtypes import as_dtype, default_float
from ...errors import UnsupportedError
from .. import functional as F
from .. import init
from ..module import Module
from ..parameter import Parameter


def _pair(value):
    return tuple(value) if isinstance(value, (tuple, list)) else (value, value)


def _single(value):
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


class _ConvNd(Module):
    """What Conv1d, Conv2d and ConvTranspose2d share: argument checks, attributes, weight and bias, PyTorch's
    initialisation and repr. ``_expand`` turns an int argument into one value per spatial dim."""

    _expand = staticmethod(_pair)

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                 padding_mode, dtype, weight_channels):
        super().__init__()
        name = type(self).__name__
        if groups != 1:
            raise UnsupportedError(f"gradviz's {name} supports groups=1 only (got groups={groups})")
        self._check_padding_mode(padding_mode)
        if isinstance(padding, str):
            if padding not in ("valid", "same"):
                raise ValueError(f"Invalid padding string '{padding}', should be one of {{'valid', 'same'}}")
            if padding == "same" and any(s != 1 for s in self._expand(stride)):
                raise ValueError("padding='same' is not supported for strided convolutions")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = self._expand(kernel_size)
        self.stride = self._expand(stride)
        self.padding = padding if isinstance(padding, str) else self._expand(padding)
        self.dilation = self._expand(dilation)
        self.groups = groups
        self.padding_mode = padding_mode
        dtype = as_dtype(dtype) or default_float()  # torch.set_default_dtype applies to new layers
        self.weight = Parameter(np.empty(weight_channels + self.kernel_size, dtype=dtype))
        if bias:
            self.bias = Parameter(np.empty(out_channels, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def _check_padding_mode(self, padding_mode):
        if padding_mode != "zeros":
            raise UnsupportedError(f"gradviz's {type(self).__name__} supports padding_mode='zeros' only "
                                   f"(got {padding_mode!r})")

    def reset_parameters(self):
        # kaiming-uniform weight, bias from the fan-in (weight.shape[1] * kernel: in_channels, or out_channels
        # for the transposed convolution, as in PyTorch)
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def extra_repr(self):
        zeros, ones = self._expand(0), self._expand(1)
        text = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != zeros:
            text += f", padding={self.padding}"
        if self.dilation != ones:
            text += f", dilation={self.dilation}"
        if getattr(self, "output_padding", zeros) != zeros:
            text += f", output_padding={self.output_padding}"
        if self.bias is None:
            text += ", bias=False"
        return text


class Conv2d(_ConvNd):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, dtype, (out_channels, in_channels))

    def forward(self, input):
        return F.conv2d(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


class Conv1d(_ConvNd):
    """1-d cross-correlation over (N, C, L); runs as a 2-d convolution on a height-1 plane."""

    _expand = staticmethod(_single)

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, dtype, (out_channels, in_channels))

    def forward(self, input):
        return F.conv1d(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


class ConvTranspose2d(_ConvNd):
    """The transposed 2-d convolution; ``weight`` is (in_channels, out_channels, kH, kW), as in PyTorch."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, _pair(padding), dilation, groups, bias,
                         padding_mode, dtype, (in_channels, out_channels))
        self.output_padding = _pair(output_padding)

    def _check_padding_mode(self, padding_mode):
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {type(self).__name__}')

    def forward(self, input, output_size=None):
        output_padding = self._output_padding(input, output_size)
        return F.conv_transpose2d(input, self.weight, self.bias, self.stride, self.padding, output_padding,
                                  self.groups, self.dilation)

    def _output_padding(self, input, output_size):
        """``output_size`` picks the output padding that gives it (PyTorch's rule and message)."""
        if output_size is None:
            return self.output_padding
        lead = 2 if input.ndim == 4 else 1
        size = list(output_size)
        if len(size) == lead + 2:
            size = size[lead:]
        if len(size) != 2:
            raise ValueError(f"ConvTranspose2D: for {input.ndim}D input, output_size must have 2 or {lead + 2} "
                             f"elements (got {len(size)})")
        spatial = tuple(input.shape[-2:])
        smallest = [(s - 1) * st - 2 * p + d * (k - 1) + 1 for s, st, p, d, k in
                    zip(spatial, self.stride, self.padding, self.dilation, self.kernel_size)]
        largest = [lo + st - 1 for lo, st in zip(smallest, self.stride)]
        if any(not lo <= s <= hi for s, lo, hi in zip(size, smallest, largest)):
            raise ValueError(f"requested an output size of {size}, but valid sizes range from {smallest} to "
                             f"{largest} (for an input of torch.Size([{', '.join(str(d) for d in spatial)}]))")
        return tuple(s - lo for s, lo in zip(size, smallest))
