"""Normalisation layers: ``BatchNorm1d/2d/3d`` (running statistics as buffers), ``LayerNorm``, ``GroupNorm`` and
``InstanceNorm1d/2d`` and ``RMSNorm``, with PyTorch's parameters, buffers and state_dict keys."""

import warnings

import numpy as np

from ...autograd.variable import Variable
from ...dtypes import as_dtype
from .. import functional as F
from ..module import Module
from ..parameter import Parameter


def _floats(dtype):
    return as_dtype(dtype) or np.dtype(np.float32)


def _register_affine(module, shape, dtype, affine, bias):
    """``weight`` (ones) and ``bias`` (zeros) of ``shape``, or ``None`` entries so state_dict keys match PyTorch."""
    if affine:
        module.weight = Parameter(np.ones(shape, dtype=dtype))
        if bias:
            module.bias = Parameter(np.zeros(shape, dtype=dtype))
            return
    else:
        module.register_parameter("weight", None)
    module.register_parameter("bias", None)


class _BatchNorm(Module):
    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None,
                 dtype=None, *, bias=True):
        super().__init__()
        dtype = _floats(dtype)
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        _register_affine(self, num_features, dtype, affine, bias)
        if track_running_stats:
            self.register_buffer("running_mean", Variable(np.zeros(num_features, dtype=dtype)))
            self.register_buffer("running_var", Variable(np.ones(num_features, dtype=dtype)))
            self.register_buffer("num_batches_tracked", Variable(np.array(0, dtype=np.int64)))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def reset_running_stats(self):
        if self.track_running_stats:
            for buf, value in ((self.running_mean, 0), (self.running_var, 1), (self.num_batches_tracked, 0)):
                buf._data[...] = value
                buf._vc.value += 1

    def reset_parameters(self):
        self.reset_running_stats()
        if self.affine:
            for p, value in ((self.weight, 1), (self.bias, 0)):
                if p is None:
                    continue
                p._data[...] = value
                p._vc.value += 1

    def _check_input_dim(self, input):
        raise NotImplementedError

    def forward(self, input):
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked._data += 1
            self.num_batches_tracked._vc.value += 1
            if self.momentum is None:  # a cumulative moving average
                factor = 1.0 / float(self.num_batches_tracked._data)
        use_batch_stats = self.training or (self.running_mean is None and self.running_var is None)
        keep = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if keep else None, self.running_var if keep else None,
                            self.weight, self.bias, use_batch_stats, factor, self.eps)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    def _check_input_dim(self, input):
        if input.ndim not in (2, 3):
            raise ValueError(f"expected 2D or 3D input (got {input.ndim}D input)")


class BatchNorm2d(_BatchNorm):
    def _check_input_dim(self, input):
        if input.ndim != 4:
            raise ValueError(f"expected 4D input (got {input.ndim}D input)")


class LayerNorm(Module):
    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, device=None, dtype=None):
        super().__init__()
        dtype = _floats(dtype)
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.normalized_shape = shape
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        _register_affine(self, shape, dtype, elementwise_affine, bias)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}, "
                f"bias={self.bias is not None}")


class GroupNorm(Module):
    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None, *, bias=True):
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError("num_channels must be divisible by num_groups")
        dtype = _floats(dtype)
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        _register_affine(self, num_channels, dtype, affine, bias)

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")


class BatchNorm3d(_BatchNorm):
    def _check_input_dim(self, input):
        if input.ndim != 5:
            raise ValueError(f"expected 5D input (got {input.ndim}D input)")


class _InstanceNorm(_BatchNorm):
    """Per-sample, per-channel normalisation over the spatial dims; no affine parameters and no running
    statistics unless asked for."""

    _spatial_dims = 1

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False, track_running_stats=False, device=None,
                 dtype=None, *, bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)

    def _check_input_dim(self, input):
        low = self._spatial_dims + 1
        if input.ndim not in (low, low + 1):
            raise ValueError(f"expected {low}D or {low + 1}D input (got {input.ndim}D input)")

    def forward(self, input):
        self._check_input_dim(input)
        feature_dim = input.ndim - self._spatial_dims - 1
        if input.shape[feature_dim] != self.num_features:
            if self.affine:
                raise ValueError(f"expected input's size at dim={feature_dim} to match num_features "
                                 f"({self.num_features}), but got: {input.shape[feature_dim]}.")
            warnings.warn(f"input's size at dim={feature_dim} does not match num_features. You can silence this "
                          "warning by not passing in num_features, which is not used because affine=False",
                          UserWarning, stacklevel=2)
        unbatched = input.ndim == self._spatial_dims + 1
        x = input.unsqueeze(0) if unbatched else input
        out = F.instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                              self.training or not self.track_running_stats,
                              self.momentum if self.momentum is not None else 0.0, self.eps)
        return out.squeeze(0) if unbatched else out


class InstanceNorm1d(_InstanceNorm):
    _spatial_dims = 1


class InstanceNorm2d(_InstanceNorm):
    _spatial_dims = 2


class RMSNorm(Module):
    """Root-mean-square normalisation over the last dims, with an elementwise weight (no bias, no centring)."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None, dtype=None):
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.normalized_shape = shape
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(np.ones(shape, dtype=_floats(dtype)))
        else:
            self.register_parameter("weight", None)

    def forward(self, x):
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
