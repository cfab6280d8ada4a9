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


class Conv2d(Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        if groups != 1:
            raise UnsupportedError(f"gradviz's Conv2d supports groups=1 only (got groups={groups})")
        if padding_mode != "zeros":
            raise UnsupportedError(f"gradviz's Conv2d supports padding_mode='zeros' only (got {padding_mode!r})")
        if isinstance(padding, str):
            if padding not in ("valid", "same"):
                raise ValueError(f"Invalid padding string '{padding}', should be one of {{'valid', 'same'}}")
            if padding == "same" and _pair(stride) != (1, 1):
                raise ValueError("padding='same' is not supported for strided convolutions")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _pair(kernel_size)
        self.stride = _pair(stride)
        self.padding = padding if isinstance(padding, str) else _pair(padding)
        self.dilation = _pair(dilation)
        self.groups = groups
        self.padding_mode = padding_mode
        dtype = as_dtype(dtype) or default_float()  # torch.set_default_dtype applies to new layers
        self.weight = Parameter(np.empty((out_channels, in_channels) + self.kernel_size, dtype=dtype))
        if bias:
            self.bias = Parameter(np.empty(out_channels, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        return F.conv2d(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)

    def extra_repr(self):
        text = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0, 0):
            text += f", padding={self.padding}"
        if self.dilation != (1, 1):
            text += f", dilation={self.dilation}"
        if self.bias is None:
            text += ", bias=False"
        return text


class Conv1d(Module):
    """1-d cross-correlation over (N, C, L); runs as a 2-d convolution on a height-1 plane."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        if groups != 1:
            raise UnsupportedError(f"gradviz's Conv1d supports groups=1 only (got groups={groups})")
        if padding_mode != "zeros":
            raise UnsupportedError(f"gradviz's Conv1d supports padding_mode='zeros' only (got {padding_mode!r})")
        if isinstance(padding, str):
            if padding not in ("valid", "same"):
                raise ValueError(f"Invalid padding string '{padding}', should be one of {{'valid', 'same'}}")
            if padding == "same" and _single(stride) != (1,):
                raise ValueError("padding='same' is not supported for strided convolutions")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _single(kernel_size)
        self.stride = _single(stride)
        self.padding = padding if isinstance(padding, str) else _single(padding)
        self.dilation = _single(dilation)
        self.groups = groups
        self.padding_mode = padding_mode
        dtype = as_dtype(dtype) or np.dtype(np.float32)
        self.weight = Parameter(np.empty((out_channels, in_channels) + self.kernel_size, dtype=dtype))
        if bias:
            self.bias = Parameter(np.empty(out_channels, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        Conv2d.reset_parameters(self)  # the same rule: kaiming-uniform weight, bias from the fan-in

    def forward(self, input):
        return F.conv1d(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)

    def extra_repr(self):
        text = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,):
            text += f", padding={self.padding}"
        if self.dilation != (1,):
            text += f", dilation={self.dilation}"
        if self.bias is None:
            text += ", bias=False"
        return text


def _single(value):
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


class ConvTranspose2d(Module):
    """The transposed 2-d convolution; ``weight`` is (in_channels, out_channels, kH, kW), as in PyTorch."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        if groups != 1:
            raise UnsupportedError(f"gradviz's ConvTranspose2d supports groups=1 only (got groups={groups})")
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {type(self).__name__}')
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _pair(kernel_size)
        self.stride = _pair(stride)
        self.padding = _pair(padding)
        self.output_padding = _pair(output_padding)
        self.dilation = _pair(dilation)
        self.groups = groups
        self.padding_mode = padding_mode
        dtype = as_dtype(dtype) or np.dtype(np.float32)
        self.weight = Parameter(np.empty((in_channels, out_channels) + self.kernel_size, dtype=dtype))
        if bias:
            self.bias = Parameter(np.empty(out_channels, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        Conv2d.reset_parameters(self)  # the fan-in is weight.shape[1] * kH * kW here, as in PyTorch

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

    def extra_repr(self):
        text = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0, 0):
            text += f", padding={self.padding}"
        if self.dilation != (1, 1):
            text += f", dilation={self.dilation}"
        if self.output_padding != (0, 0):
            text += f", output_padding={self.output_padding}"
        if self.bias is None:
            text += ", bias=False"
        return text
