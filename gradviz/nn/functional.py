"""``gradviz.nn.functional``: the layers and losses as functions (``torch.nn.functional``'s names)."""

import warnings

import numpy as np

from ..autograd.inplace import apply_inplace
from ..autograd.variable import Variable
from ..errors import ShapeError, UnsupportedError
from ..factories import _rng
from ..ops import nn_ops as _N
from ..ops import reduction as _R


def _array(x):
    return x._data if isinstance(x, Variable) else (None if x is None else np.asarray(x))


def _pair(value, name="value"):
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise ValueError(f"{name} must be an int or a pair of ints, got {value!r}")
        return int(value[0]), int(value[1])
    return int(value), int(value)


def _unbatched(fn, x, *args, **kwargs):
    """Run a 4-d op on a 3-d (C, H, W) input by adding and removing the batch dimension."""
    out = fn(x.unsqueeze(0), *args, **kwargs)
    if isinstance(out, tuple):
        return tuple(o.squeeze(0) for o in out)
    return out.squeeze(0)


# ----- activations ----------------------------------------------------------------------------------------
def relu(input, inplace=False):
    return input.relu_() if inplace else input.relu()


def sigmoid(input):
    return input.sigmoid()


def tanh(input):
    return input.tanh()


def _implicit_dim(name, ndim):
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call to include dim=X "
                  "as an argument.", UserWarning, stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None, dtype=None):
    if dim is None:
        dim = _implicit_dim("softmax", input.ndim)
    if dtype is not None:
        input = input.to(dtype)
    return _R.Softmax.apply(input, dim=dim)


def log_softmax(input, dim=None, dtype=None):
    if dim is None:
        dim = _implicit_dim("log_softmax", input.ndim)
    if dtype is not None:
        input = input.to(dtype)
    return _R.LogSoftmax.apply(input, dim=dim)


# ----- layers -------------------------------------------------------------------------------------------------
def linear(input, weight, bias=None):
    """``input @ weight.T + bias`` as one node (``AddmmBackward``, or ``MmBackward`` without bias)."""
    if bias is None:
        return _N.Mm.apply(input, weight)
    return _N.Addmm.apply(input, weight, bias)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    if groups != 1:
        raise UnsupportedError(f"gradviz's conv2d supports groups=1 only (got groups={groups})")
    if input.ndim == 3:
        return _unbatched(conv2d, input, weight, bias, stride, padding, dilation)
    stride, dilation = _pair(stride, "stride"), _pair(dilation, "dilation")
    pads = _conv_padding(padding, weight.shape[2:], stride, dilation)
    if bias is None:
        return _N.Convolution.apply(input, weight, stride=stride, pads=pads, dilation=dilation)
    return _N.Convolution.apply(input, weight, bias, stride=stride, pads=pads, dilation=dilation)


def _conv_padding(padding, kernel, stride, dilation):
    """(top, bottom, left, right) from an int, a pair, 'valid' or 'same' (which may be lopsided)."""
    if isinstance(padding, str):
        if padding == "valid":
            return (0, 0, 0, 0)
        if padding != "same":
            raise ValueError(f"Invalid padding string '{padding}', should be one of {{'valid', 'same'}}")
        if stride != (1, 1):
            raise ValueError("padding='same' is not supported for strided convolutions")
        pads = []
        for k, d in zip(kernel, dilation):
            total = d * (k - 1)
            pads += [total // 2, total - total // 2]
        return tuple(pads)
    ph, pw = _pair(padding, "padding")
    return (ph, ph, pw, pw)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    if input.ndim == 3:
        return _unbatched(max_pool2d, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)
    if input.ndim != 4 or input.numel() == 0:
        raise ShapeError("non-empty 3D or 4D (batch mode) tensor expected for input")
    kernel = _pair(kernel_size, "kernel_size")
    stride = kernel if stride is None or (isinstance(stride, (tuple, list)) and not stride) \
        else _pair(stride, "stride")
    padding, dilation = _pair(padding, "padding"), _pair(dilation, "dilation")
    for p, k, d in zip(padding, kernel, dilation):
        if p > (d * (k - 1) + 1) // 2:
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got pad={p}, "
                               f"kernel_size={k} and dilation={d}")
    values, indices = _N.MaxPool2DWithIndices.apply(input, kernel=kernel, stride=stride, padding=padding,
                                                   dilation=dilation, ceil_mode=bool(ceil_mode))
    return (values, indices) if return_indices else values


def dropout(input, p=0.5, training=True, inplace=False):
    if p < 0 or p > 1:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training:
        return input
    if inplace:
        return apply_inplace(_N.Dropout, input, p=p, rng=_rng())
    return _N.Dropout.apply(input, p=p, rng=_rng())


# ----- losses -------------------------------------------------------------------------------------------------
def _legacy_reduction(size_average, reduce, reduction):
    """PyTorch's deprecated ``size_average``/``reduce`` flags, mapped onto ``reduction``."""
    if size_average is None and reduce is None:
        _N.check_reduction(reduction)
        return reduction
    warnings.warn("size_average and reduce args will be deprecated, please use reduction='"
                  f"{_legacy_name(size_average, reduce)}' instead.", UserWarning, stacklevel=3)
    return _legacy_name(size_average, reduce)


def _legacy_name(size_average, reduce):
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    if not reduce:
        return "none"
    return "mean" if size_average else "sum"


def _warn_target_size(input, target):
    if isinstance(target, Variable) and tuple(target.shape) != tuple(input.shape):
        warnings.warn(f"Using a target size ({target.shape}) that is different to the input size ({input.shape}). "
                      "This will likely lead to incorrect results due to broadcasting. Please ensure they have the "
                      "same size.", UserWarning, stacklevel=3)


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _warn_target_size(input, target)
    return _N.MseLoss.apply(input, target, reduction=reduction)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _warn_target_size(input, target)
    return _N.L1Loss.apply(input, target, reduction=reduction)


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if tuple(np.shape(_array(target))) != tuple(input.shape):
        raise ValueError(f"Using a target size ({_size(np.shape(_array(target)))}) that is different to the input "
                         f"size ({input.shape}) is deprecated. Please ensure they have the same size.")
    return _N.BinaryCrossEntropy.apply(input, target, weight=_array(weight), reduction=reduction)


def _size(shape):
    return f"torch.Size([{', '.join(str(d) for d in shape)}])"


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _N.check_class_target(input._data, _array(target), "nll_loss")
    return _N.NllLoss.apply(input, target, weight=_array(weight), ignore_index=ignore_index, reduction=reduction)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    """log_softmax over dim 1 followed by nll_loss, as one fused node; targets are class indices or, with the
    input's shape, class probabilities."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if label_smoothing:
        raise UnsupportedError("gradviz's cross_entropy does not implement label_smoothing")
    t = _array(target)
    if t.dtype.kind == "f" and t.shape == tuple(input.shape):
        return _N.CrossEntropyLoss.apply(input, target, weight=_array(weight), reduction=reduction)
    _N.check_class_target(input._data, t, "cross_entropy")
    return _N.CrossEntropyLoss.apply(input, target, weight=_array(weight), ignore_index=ignore_index,
                                     reduction=reduction)


__all__ = ["relu", "sigmoid", "tanh", "softmax", "log_softmax", "linear", "conv2d", "max_pool2d", "dropout",
           "mse_loss", "l1_loss", "binary_cross_entropy", "nll_loss", "cross_entropy"]

# ----- opsb ------------------------------------------------------------------------------------------------------
from ..ops.scatter import one_hot  # noqa: E402

__all__ += ["one_hot"]
