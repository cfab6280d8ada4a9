"""``gradviz.nn.functional``: the layers and losses as functions (``torch.nn.functional``'s names)."""

import warnings

import numpy as np

from ..autograd.inplace import apply_inplace
from ..autograd.variable import Variable
from ..errors import ShapeError, UnsupportedError
from ..factories import _rng
from ..ops import arithmetic as _A
from ..ops import indexing as _I
from ..ops import nn_activation as _NA
from ..ops import nn_layers as _NL
from ..ops import nn_loss as _NLoss
from ..ops import nn_norm as _NN
from ..ops import nn_ops as _N
from ..ops import nn_pool as _NP
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
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    t = _array(target)
    if t.dtype.kind == "f" and t.shape == tuple(input.shape):
        if label_smoothing:  # probabilities: mix with the uniform distribution
            target = target * (1 - label_smoothing) + label_smoothing / input.shape[1 if input.ndim > 1 else 0]
        return _N.CrossEntropyLoss.apply(input, target, weight=_array(weight), reduction=reduction)
    _N.check_class_target(input._data, t, "cross_entropy")
    if label_smoothing:
        return _N.CrossEntropyLoss.apply(input, target, weight=_array(weight), ignore_index=ignore_index,
                                         reduction=reduction, label_smoothing=float(label_smoothing))
    return _N.CrossEntropyLoss.apply(input, target, weight=_array(weight), ignore_index=ignore_index,
                                     reduction=reduction)


__all__ = ["relu", "sigmoid", "tanh", "softmax", "log_softmax", "linear", "conv2d", "max_pool2d", "dropout",
           "mse_loss", "l1_loss", "binary_cross_entropy", "nll_loss", "cross_entropy"]

# ----- opsb ------------------------------------------------------------------------------------------------------
from ..ops.scatter import one_hot  # noqa: E402

__all__ += ["one_hot"]


# ===== issue 8 (nn): more activations, normalisation, embedding, pooling, attention and losses =================
def gelu(input, approximate="none"):
    if approximate not in ("none", "tanh"):
        raise RuntimeError("approximate argument must be either none or tanh.")
    return _NA.Gelu.apply(input, approximate=approximate)


def _maybe_inplace(cls, input, inplace, **kwargs):
    return apply_inplace(cls, input, **kwargs) if inplace else cls.apply(input, **kwargs)


def silu(input, inplace=False):
    return _maybe_inplace(_NA.Silu, input, inplace)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    return _maybe_inplace(_NA.LeakyRelu, input, inplace, negative_slope=negative_slope)


def elu(input, alpha=1.0, inplace=False):
    return _maybe_inplace(_NA.Elu, input, inplace, alpha=alpha)


def softplus(input, beta=1.0, threshold=20.0):
    return _NA.Softplus.apply(input, beta=beta, threshold=threshold)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    return _maybe_inplace(_NA.Hardtanh, input, inplace, min_val=min_val, max_val=max_val)


def relu6(input, inplace=False):
    return hardtanh(input, 0.0, 6.0, inplace)


def selu(input, inplace=False):
    return _maybe_inplace(_NA.Selu, input, inplace)


def celu(input, alpha=1.0, inplace=False):
    return _maybe_inplace(_NA.Celu, input, inplace, alpha=alpha)


def mish(input, inplace=False):
    return _maybe_inplace(_NA.Mish, input, inplace)


def hardswish(input, inplace=False):
    return _maybe_inplace(_NA.Hardswish, input, inplace)


def hardsigmoid(input, inplace=False):
    return _maybe_inplace(_NA.Hardsigmoid, input, inplace)


def logsigmoid(input):
    return _NA.LogSigmoid.apply(input)


def softsign(input):
    return _NA.Softsign.apply(input)


def tanhshrink(input):
    return _NA.Tanhshrink.apply(input)


def threshold(input, threshold, value, inplace=False):
    return _maybe_inplace(_NA.Threshold, input, inplace, threshold=threshold, value=value)


def prelu(input, weight):
    channels = input.shape[1] if input.ndim >= 2 else 1
    if weight.numel() != 1 and weight.numel() != channels:
        raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found parameter numbers = "
                           f"{weight.numel()} and channel size = {channels}.")
    return _NA.Prelu.apply(input, weight)


def glu(input, dim=-1):
    """The first half of ``dim`` gated by the sigmoid of the second half."""
    if input.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    d = dim % input.ndim
    size = input.shape[d]
    if size % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {d} is size {size}")
    lead = (slice(None),) * d
    return input[lead + (slice(0, size // 2),)] * input[lead + (slice(size // 2, None),)].sigmoid()


def _tensor_size(shape):
    return f"torch.Size([{', '.join(str(d) for d in shape)}])"


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    """Normalise each channel (dim 1). In training the batch's statistics are used and, when running buffers
    are given, folded into them in place (the variance unbiased), as PyTorch does."""
    if training:
        count = input.numel() // input.shape[1] if input.ndim > 1 else 0
        if count <= 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input size "
                             f"{_tensor_size(input.shape)}")
    elif running_mean is None or running_var is None:
        raise RuntimeError(f"running_{'mean' if running_mean is None else 'var'} must be defined in evaluation mode")
    if input.ndim < 2:
        raise ValueError(f"expected 2D or 3D input (got {input.ndim}D input)")
    stats = {} if training and running_mean is not None else None
    out = _NN.BatchNorm.apply(input, weight, bias, running_mean=None if training else _array(running_mean),
                              running_var=None if training else _array(running_var), training=bool(training),
                              eps=eps, stats=stats)
    if stats:
        n = input.numel() // input.shape[1]
        _fold_in(running_mean, stats["mean"], momentum)
        _fold_in(running_var, stats["var"] * (n / (n - 1)), momentum)
    return out


def _fold_in(buffer, value, momentum):
    """``buffer = (1 - momentum) * buffer + momentum * value`` in place, bumping its version as PyTorch does."""
    if buffer is None:
        return
    data = buffer._data
    data *= 1 - momentum
    data += (momentum * value).astype(data.dtype, copy=False)
    buffer._vc.value += 1


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                  momentum=0.1, eps=1e-5):
    """Normalise each (sample, channel) over its spatial dims (a group norm with one channel per group); with
    ``use_input_stats=False``, normalise with the running statistics instead."""
    if not use_input_stats:
        return _NN.BatchNorm.apply(input, weight, bias, running_mean=_array(running_mean),
                                   running_var=_array(running_var), training=False, eps=eps)
    spatial = int(np.prod(input.shape[2:]))
    if spatial <= 1:
        raise ValueError(f"Expected more than 1 spatial element when training, got input size "
                         f"{_tensor_size(input.shape)}")
    if running_mean is not None or running_var is not None:
        flat = input._data.reshape(input.shape[0], input.shape[1], -1)
        _fold_in(running_mean, flat.mean(axis=(0, 2)), momentum)
        _fold_in(running_var, flat.var(axis=2, ddof=1).mean(axis=0), momentum)
    return _NN.GroupNorm.apply(input, weight, bias, num_groups=input.shape[1], eps=eps)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if tuple(input.shape[input.ndim - len(shape):]) != shape or input.ndim < len(shape):
        raise ShapeError(f"Given normalized_shape={list(shape)}, expected input with shape [*, "
                         f"{', '.join(str(d) for d in shape)}], but got input of size{list(input.shape)}")
    return _NN.LayerNorm.apply(input, weight, bias, n_dims=len(shape), eps=eps)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    if input.ndim < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received {input.ndim}")
    if input.shape[1] % num_groups:
        raise ShapeError(f"Expected number of channels in input to be divisible by num_groups, but got input of "
                         f"shape {list(input.shape)} and num_groups={num_groups}")
    return _NN.GroupNorm.apply(input, weight, bias, num_groups=num_groups, eps=eps)


def dropout2d(input, p=0.5, training=True, inplace=False):
    if p < 0 or p > 1:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if input.ndim not in (3, 4):
        warnings.warn(f"dropout2d: Received a {input.ndim}-D input to dropout2d, which is deprecated and will "
                      "result in an error in a future release. To retain the behavior and silence this warning, "
                      "please use dropout instead. Note that dropout2d exists to provide channel-wise dropout on "
                      "inputs with 2 spatial dimensions, a channel dimension, and an optional batch dimension "
                      "(i.e. 3D or 4D inputs).", UserWarning, stacklevel=2)
    if input.ndim == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout "
                      "behavior is desired - input is interpreted as shape (N, C, L), where C is the channel "
                      "dim. This behavior will change in a future release to interpret the input as one without "
                      "a batch dimension, i.e. shape (C, H, W). To maintain the 1D channel-wise dropout "
                      "behavior, please switch to using dropout1d instead.", UserWarning, stacklevel=2)
    return _feature_dropout(input, p, training, inplace)


def _feature_dropout(input, p, training, inplace):
    if not training:
        return input
    if inplace:
        return apply_inplace(_NL.FeatureDropout, input, p=p, rng=_rng())
    return _NL.FeatureDropout.apply(input, p=p, rng=_rng())


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Channel-wise dropout of (N, C, L) or unbatched (C, L) inputs."""
    if p < 0 or p > 1:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if input.ndim not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D input. Note that "
                           "dropout1d exists to provide channel-wise dropout on inputs with 1 spatial dimension, a "
                           "channel dimension, and an optional batch dimension (i.e. 2D or 3D inputs).")
    if input.ndim == 2:
        return _feature_dropout(input.unsqueeze(0), p, training, False).squeeze(0)
    return _feature_dropout(input, p, training, inplace)


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Channel-wise dropout of (N, C, D, H, W) or unbatched (C, D, H, W) inputs."""
    if p < 0 or p > 1:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if input.ndim not in (4, 5):
        warnings.warn(f"dropout3d: Received a {input.ndim}-D input to dropout3d, which is deprecated and will "
                      "result in an error in a future release. To retain the behavior and silence this warning, "
                      "please use dropout instead. Note that dropout3d exists to provide channel-wise dropout on "
                      "inputs with 3 spatial dimensions, a channel dimension, and an optional batch dimension (i.e. "
                      "4D or 5D inputs).", UserWarning, stacklevel=2)
    if input.ndim != 5:
        return _feature_dropout(input.unsqueeze(0), p, training, False).squeeze(0)
    return _feature_dropout(input, p, training, inplace)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """``x / sqrt(mean(x^2) + eps) * weight`` over the last ``len(normalized_shape)`` dims; ``eps`` defaults to
    the dtype's machine epsilon, as in PyTorch."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if tuple(input.shape[input.ndim - len(shape):]) != shape or input.ndim < len(shape):
        raise ShapeError(f"Given normalized_shape={list(shape)}, expected input with shape [*, "
                         f"{', '.join(str(d) for d in shape)}], but got input of size{list(input.shape)}")
    eps = float(np.finfo(input.dtype).eps) if eps is None else eps
    dims = tuple(range(input.ndim - len(shape), input.ndim))
    out = input / ((input * input).mean(dim=dims, keepdim=True) + eps).sqrt()
    return out if weight is None else out * weight


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
              sparse=False):
    if sparse:
        raise UnsupportedError("gradviz has no sparse tensors: use embedding(..., sparse=False)")
    indices = _array(input)
    if indices.dtype.kind not in "iu":
        raise RuntimeError("Expected tensor for argument #1 'indices' to have one of the following scalar types: "
                           f"Long, Int; but got {_torch_tensor_type(indices.dtype)} instead (while checking "
                           "arguments for embedding)")
    if padding_idx is not None:
        rows = weight.shape[0]
        if not -rows <= padding_idx < rows:
            raise AssertionError("Padding_idx must be within num_embeddings")
        padding_idx = padding_idx % rows
    if max_norm is not None:
        _renorm_rows(weight, indices, max_norm, norm_type)
    return _NL.Embedding.apply(weight, indices, padding_idx=padding_idx, scale_grad_by_freq=scale_grad_by_freq)


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False, mode="mean",
                  sparse=False, per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """Bags of embeddings reduced by ``mode`` (sum, mean, max): the rows of a 2-D ``input``, or the slices of a
    1-D ``input`` that ``offsets`` start."""
    if sparse:
        raise UnsupportedError("gradviz has no sparse tensors: use embedding_bag(..., sparse=False)")
    if scale_grad_by_freq:
        raise UnsupportedError("gradviz's embedding_bag does not implement scale_grad_by_freq")
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"mode has to be one of sum, mean or max, but got {mode}")
    if per_sample_weights is not None and mode != "sum":
        raise UnsupportedError(f"embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                               f"supported for mode='sum' (got mode='{mode}'). Please open a feature request on "
                               "GitHub.")
    indices = _array(input)
    if indices.ndim == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated is a mini-batch of "
                             f"fixed length sequences. However, found offsets of type {type(offsets)}")
        n_bags = indices.shape[0]
        bags = np.repeat(np.arange(n_bags), indices.shape[1])
        indices = indices.reshape(-1)
    elif indices.ndim == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        starts = _array(offsets)
        if starts.ndim != 1:
            raise ValueError("offsets has to be a 1D Tensor")
        if starts.size and starts[0] != 0:
            raise RuntimeError("offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start "
                               f"from position 0. However, got {int(starts[0])}")
        if include_last_offset:
            starts = starts[:-1]
        n_bags = len(starts)
        bags = np.searchsorted(starts, np.arange(len(indices)), side="right") - 1
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension {indices.ndim}")
    if padding_idx is not None:
        padding_idx = padding_idx % weight.shape[0]
    if max_norm is not None:
        _renorm_rows(weight, indices, max_norm, norm_type)
    return _NL.EmbeddingBag.apply(weight, indices, per_sample_weights, bags=bags, n_bags=n_bags, mode=mode,
                                  padding_idx=padding_idx)


def _torch_tensor_type(dtype):
    return {"float32": "torch.FloatTensor", "float64": "torch.DoubleTensor", "bool": "torch.BoolTensor"}.get(
        str(dtype), str(dtype))


def _renorm_rows(weight, indices, max_norm, norm_type):
    """``max_norm``: the looked-up rows whose norm exceeds it are rescaled in place, outside the graph."""
    data = weight._data
    rows = np.unique(indices)
    if rows.size and (rows.min() < 0 or rows.max() >= data.shape[0]):
        raise IndexError("index out of range in self")
    norms = np.linalg.norm(data[rows], ord=norm_type, axis=1)
    big = norms > max_norm
    if big.any():
        data[rows[big]] *= (max_norm / (norms[big] + 1e-7))[:, None].astype(data.dtype)
        weight._vc.value += 1


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    if input.ndim == 3:
        return _unbatched(avg_pool2d, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                          divisor_override)
    if input.ndim != 4:
        raise ShapeError(f"non-empty 3D or 4D (batch mode) tensor expected for input, got {input.ndim}D")
    kernel = _pair(kernel_size, "kernel_size")
    stride = kernel if stride is None or (isinstance(stride, (tuple, list)) and not stride) \
        else _pair(stride, "stride")
    padding = _pair(padding, "padding")
    if padding[0] > kernel[0] // 2 or padding[1] > kernel[1] // 2:
        raise RuntimeError("pad should be at most half of effective kernel size, but got "
                           f"pad={max(padding)}, kernel_size={max(kernel)} and dilation=1")
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    return _NP.AvgPool2d.apply(input, kernel=kernel, stride=stride, padding=padding, ceil_mode=bool(ceil_mode),
                               count_include_pad=bool(count_include_pad), divisor_override=divisor_override)


def adaptive_avg_pool2d(input, output_size):
    if input.ndim not in (3, 4):
        raise ShapeError(f"adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got {list(input.shape)}")
    size = (output_size, output_size) if isinstance(output_size, int) else tuple(output_size)
    size = tuple(input.shape[-2 + i] if s is None else int(s) for i, s in enumerate(size))
    return _NP.AdaptiveAvgPool2d.apply(input, output_size=size)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """The transposed convolution (the gradient of conv2d with respect to its input); ``weight`` is
    (in_channels, out_channels, kH, kW)."""
    if groups != 1:
        raise UnsupportedError(f"gradviz's conv_transpose2d supports groups=1 only (got groups={groups})")
    if input.ndim == 3:
        return _unbatched(conv_transpose2d, input, weight, bias, stride, padding, output_padding, groups, dilation)
    if input.ndim != 4:
        raise ShapeError(f"Expected 3D (unbatched) or 4D (batched) input to conv_transpose2d, but got input of "
                         f"size: {list(input.shape)}")
    stride, padding = _pair(stride, "stride"), _pair(padding, "padding")
    output_padding, dilation = _pair(output_padding, "output_padding"), _pair(dilation, "dilation")
    if input.shape[1] != weight.shape[0]:
        raise ShapeError(f"Given transposed=1, weight of size {list(weight.shape)}, expected input"
                         f"{list(input.shape)} to have {weight.shape[0]} channels, but got {input.shape[1]} channels "
                         "instead")
    if any(op >= max(st, d) for op, st, d in zip(output_padding, stride, dilation)):
        raise RuntimeError(f"output padding must be smaller than either stride or dilation, but got "
                           f"output_padding_height: {output_padding[0]} output_padding_width: {output_padding[1]} "
                           f"stride_height: {stride[0]} stride_width: {stride[1]} dilation_height: {dilation[0]} "
                           f"dilation_width: {dilation[1]}")
    return _NL.ConvolutionTranspose.apply(input, weight, bias, stride=stride, padding=padding,
                                          output_padding=output_padding, dilation=dilation)



def adaptive_max_pool2d(input, output_size, return_indices=False):
    if input.ndim == 3:
        return _unbatched(adaptive_max_pool2d, input, output_size, return_indices)
    if input.ndim != 4:
        raise ShapeError(f"adaptive_max_pool2d(): Expected 3D or 4D tensor, but got: {list(input.shape)}")
    size = (output_size, output_size) if isinstance(output_size, int) else tuple(output_size)
    size = tuple(input.shape[2 + i] if s is None else int(s) for i, s in enumerate(size))
    values, indices = _NP.AdaptiveMaxPool2d.apply(input, output_size=size)
    return (values, indices) if return_indices else values


def adaptive_max_pool1d(input, output_size, return_indices=False):
    if input.ndim not in (2, 3):
        raise ShapeError(f"adaptive_max_pool1d(): Expected 2D or 3D tensor, but got: {list(input.shape)}")
    out = adaptive_max_pool2d(input.unsqueeze(-2), (1, _single(output_size)), return_indices)
    if return_indices:
        return out[0].squeeze(-2), out[1].squeeze(-2)
    return out.squeeze(-2)


def softmin(input, dim=None, dtype=None):
    if dim is None:
        dim = _implicit_dim("softmin", input.ndim)
    return softmax(-input, dim, dtype)


def pixel_shuffle(input, upscale_factor):
    """(*, C r^2, H, W) -> (*, C, H r, W r)."""
    r = int(upscale_factor)
    if input.ndim < 3:
        raise RuntimeError(f"pixel_shuffle expects input to have at least 3 dimensions, but got input with "
                           f"{input.ndim} dimension(s)")
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of "
                           f"upscale_factor, but input.size(-3)={c} is not divisible by {r * r}")
    k = len(lead)
    x = input.reshape(*lead, c // (r * r), r, r, h, w)
    x = x.permute(*range(k), k, k + 3, k + 1, k + 4, k + 2)
    return x.reshape(*lead, c // (r * r), h * r, w * r)


def pixel_unshuffle(input, downscale_factor):
    """(*, C, H r, W r) -> (*, C r^2, H, W)."""
    r = int(downscale_factor)
    if input.ndim < 3:
        raise RuntimeError(f"pixel_unshuffle expects input to have at least 3 dimensions, but got input with "
                           f"{input.ndim} dimension(s)")
    *lead, c, h, w = input.shape
    for name, size, dim in (("height", h, -2), ("width", w, -1)):
        if size % r:
            raise RuntimeError(f"pixel_unshuffle expects {name} to be divisible by downscale_factor, but "
                               f"input.size({dim})={size} is not divisible by {r}")
    k = len(lead)
    x = input.reshape(*lead, c, h // r, r, w // r, r)
    x = x.permute(*range(k), k, k + 2, k + 4, k + 1, k + 3)
    return x.reshape(*lead, c * r * r, h // r, w // r)


def _blocks(size, kernel, dilation, padding, stride):
    """The number of sliding blocks along each spatial dim."""
    return tuple((s + 2 * p - d * (k - 1) - 1) // st + 1
                 for s, k, d, p, st in zip(size, kernel, dilation, padding, stride))


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """Extract sliding local blocks: (N, C, H, W) -> (N, C * prod(kernel_size), L)."""
    if input.ndim == 3:
        return unfold(input.unsqueeze(0), kernel_size, dilation, padding, stride).squeeze(0)
    if input.ndim != 4:
        raise ShapeError(f"Input Error: Only 3D or 4D input Tensors are supported (got {input.ndim}D)")
    kernel, dilation = _pair(kernel_size, "kernel_size"), _pair(dilation, "dilation")
    padding, stride = _pair(padding, "padding"), _pair(stride, "stride")
    out_hw = _blocks(input.shape[2:], kernel, dilation, padding, stride)
    if out_hw[0] <= 0 or out_hw[1] <= 0:
        raise ShapeError(f"Given input with spatial size {tuple(input.shape[2:])}, kernel_size={kernel}, "
                         f"dilation={dilation}, padding={padding}, calculated shape of the array of sliding blocks "
                         f"as {out_hw}, but its components must be at least one.")
    pads = (padding[0], padding[0], padding[1], padding[1])
    return _NL.Unfold.apply(input, kernel=kernel, dilation=dilation, pads=pads, stride=stride, out_hw=out_hw)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """Combine sliding local blocks into an image, summing overlaps: (N, C * prod(kernel_size), L) ->
    (N, C, H, W)."""
    if input.ndim == 2:
        return fold(input.unsqueeze(0), output_size, kernel_size, dilation, padding, stride).squeeze(0)
    if input.ndim != 3:
        raise ShapeError(f"Input Error: Only unbatched (2D) or batched (3D) input Tensors are supported (got "
                         f"{input.ndim}D)")
    size, kernel = _pair(output_size, "output_size"), _pair(kernel_size, "kernel_size")
    dilation, padding, stride = _pair(dilation, "dilation"), _pair(padding, "padding"), _pair(stride, "stride")
    per_block = kernel[0] * kernel[1]
    if input.shape[1] % per_block:
        raise RuntimeError(f"Expected size of input's dimension 1 to be divisible by the product of kernel_size, but "
                           f"got input.size(1)={input.shape[1]} and kernel_size={kernel}.")
    out_hw = _blocks(size, kernel, dilation, padding, stride)
    if input.shape[2] != out_hw[0] * out_hw[1]:
        raise RuntimeError(f"Given output_size={size}, kernel_size={kernel}, dilation={dilation}, padding={padding}, "
                           f"stride={stride}, expected size of input's dimension 2 to match the calculated number of "
                           f"sliding blocks {out_hw[0]} * {out_hw[1]} = {out_hw[0] * out_hw[1]}, but got "
                           f"input.size(2)={input.shape[2]}.")
    image_shape = (input.shape[0], input.shape[1] // per_block) + size
    pads = (padding[0], padding[0], padding[1], padding[1])
    return _NL.Fold.apply(input, image_shape=image_shape, kernel=kernel, dilation=dilation, pads=pads,
                          stride=stride, out_hw=out_hw)


def bilinear(input1, input2, weight, bias=None):
    """``y_o = x1 . W_o . x2 + b_o`` over the last dims (leading dims shared), from the engine's matmul."""
    out_features, in1, in2 = weight.shape
    lead = tuple(input1.shape[:-1])
    x1 = input1.reshape(-1, in1)
    x2 = input2.reshape(-1, in2)
    mixed = x1.matmul(weight.permute(1, 0, 2).reshape(in1, out_features * in2))  # (M, out * in2)
    y = (mixed.reshape(-1, out_features, in2) * x2.unsqueeze(1)).sum(-1)
    if bias is not None:
        y = y + bias
    return y.reshape(*lead, out_features)


# ----- 1-d convolution and pooling: the 2-d ops on a height-1 plane ----------------------------------------
def _single(value):
    return int(value[0]) if isinstance(value, (tuple, list)) else value


def _as_plane(input, name, message):
    """(N, C, L) or unbatched (C, L) -> (N, C, 1, L), with PyTorch's dimension check."""
    if input.ndim not in (2, 3):
        raise ShapeError(message.format(name=name, shape=list(input.shape)))
    x = input if input.ndim == 3 else input.unsqueeze(0)
    return x.unsqueeze(2)


def _from_plane(out, input):
    out = out.squeeze(2)
    return out if input.ndim == 3 else out.squeeze(0)


_CONV1D_DIMS = "Expected 2D (unbatched) or 3D (batched) input to {name}, but got input of size: {shape}"
_POOL1D_DIMS = "{name}: Expected 2D or 3D (batch mode) tensor with optional 0 dim batch size for input, but got:{shape}"


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    x = _as_plane(input, "conv1d", _CONV1D_DIMS)
    pad = padding if isinstance(padding, str) else (0, _single(padding))
    out = conv2d(x, weight.unsqueeze(2), bias, (1, _single(stride)), pad, (1, _single(dilation)), groups)
    return _from_plane(out, input)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    x = _as_plane(input, "max_pool1d", _POOL1D_DIMS)
    stride = kernel_size if stride is None or (isinstance(stride, (tuple, list)) and not stride) else stride
    out = max_pool2d(x, (1, _single(kernel_size)), (1, _single(stride)), (0, _single(padding)),
                     (1, _single(dilation)), ceil_mode, return_indices)
    if return_indices:
        return _from_plane(out[0], input), _from_plane(out[1], input)
    return _from_plane(out, input)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    x = _as_plane(input, "avg_pool1d", _POOL1D_DIMS)
    stride = kernel_size if stride is None or (isinstance(stride, (tuple, list)) and not stride) else stride
    out = avg_pool2d(x, (1, _single(kernel_size)), (1, _single(stride)), (0, _single(padding)), ceil_mode,
                     count_include_pad)
    return _from_plane(out, input)


def adaptive_avg_pool1d(input, output_size):
    if input.ndim not in (2, 3):
        raise ShapeError(f"Expected 2 to 3 dimensions, but got {input.ndim}-dimensional tensor for argument #1 'self' "
                         "(while checking arguments for adaptive_avg_pool1d)")
    return adaptive_avg_pool2d(input.unsqueeze(-2), (1, _single(output_size))).squeeze(-2)


# ----- padding and normalising --------------------------------------------------------------------------------
_PAD_MODES = ("constant", "reflect", "replicate", "circular")


def pad(input, pad, mode="constant", value=None):
    """Pad the last ``len(pad) // 2`` dims: ``pad = (left of the last dim, right of it, left of the one before,
    ...)``; negative amounts crop. Modes: constant (``value``, default 0), reflect, replicate, circular."""
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pad) // 2 > input.ndim:
        raise RuntimeError("Padding length should be less than or equal to two times the input dimension but got "
                           f"padding length {len(pad)} and input of dimension {input.ndim}")
    if mode not in _PAD_MODES:
        raise UnsupportedError(f"Unrecognised padding mode {mode}")
    pairs = [(input.ndim - 1 - k, (int(pad[2 * k]), int(pad[2 * k + 1]))) for k in range(len(pad) // 2)]
    if mode != "constant":
        if mode == "reflect":
            for axis, (low, high) in pairs:
                if low >= input.shape[axis] or high >= input.shape[axis]:
                    raise RuntimeError("Argument #4: Padding size should be less than the corresponding input "
                                       f"dimension, but got: padding ({low}, {high}) at dimension {axis} of input "
                                       f"{list(input.shape)}")
        if any(low < 0 or high < 0 for _, (low, high) in pairs):
            raise UnsupportedError(f"gradviz's pad crops (negative padding) in constant mode only, not {mode!r}")
    return _NL.Pad.apply(input, pads=tuple(pairs), mode=mode, value=0.0 if value is None else value)


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """``input / max(||input||_p over dim, eps)``."""
    if out is not None:
        raise UnsupportedError("gradviz's normalize does not take out=")
    return input / _p_norm(input, float(p), dim).clamp(min=eps)


def _p_norm(input, p, dim):
    """The p-norm over ``dim``, kept as a size-1 dim."""
    return input.norm(p, dim, keepdim=True)


# ----- attention -------------------------------------------------------------------------------------------
def _float_mask(mask, name, dtype):
    """A bool mask (True: masked out) as an additive float mask, or a float mask as it is."""
    if mask is None:
        return None
    m = _array(mask)
    if m.dtype == np.bool_:
        return np.where(m, -np.inf, 0.0).astype(dtype)
    if m.dtype.kind != "f":
        raise AssertionError(f"only bool and floating types of {name} are supported")
    return m.astype(dtype, copy=False)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """``softmax(q k^T * scale + bias) v`` over the last two dims. A bool ``attn_mask`` here marks the
    positions that TAKE part (PyTorch's convention for this function, the opposite of nn.MultiheadAttention)."""
    if enable_gqa:
        raise UnsupportedError("gradviz's scaled_dot_product_attention does not implement enable_gqa")
    length, source = query.shape[-2], key.shape[-2]
    scale = 1.0 / np.sqrt(query.shape[-1]) if scale is None else scale
    scores = query.matmul(key.transpose(-2, -1)) * scale
    bias = None
    if is_causal:
        if attn_mask is not None:
            raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set when "
                               "is_causal=True")
        bias = np.where(np.tril(np.ones((length, source), dtype=bool)), 0.0, -np.inf).astype(query.dtype)
    elif attn_mask is not None:
        m = _array(attn_mask)
        bias = np.where(m, 0.0, -np.inf).astype(query.dtype) if m.dtype == np.bool_ else attn_mask
    if bias is not None:
        scores = scores + bias
    weights = softmax(scores, dim=-1)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p, training=True)
    return weights.matmul(value)


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias,
                                 bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias,
                                 training=True, key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None, k_proj_weight=None,
                                 v_proj_weight=None, static_k=None, static_v=None, average_attn_weights=True,
                                 is_causal=False):
    """PyTorch's multi-head attention on (L, N, E) inputs (or unbatched (L, E)); returns the output and, when
    ``need_weights``, the attention weights (averaged over heads unless ``average_attn_weights=False``)."""
    if static_k is not None or static_v is not None:
        raise UnsupportedError("gradviz's multi_head_attention_forward does not implement static_k/static_v")
    batched = query.ndim == 3
    if not batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = _array(key_padding_mask)[None]
    tgt_len, bsz, embed_dim = query.shape
    if embed_dim != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but got {embed_dim}")
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise AssertionError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    q, k, v = _in_projection(query, key, value, embed_dim, in_proj_weight, in_proj_bias,
                             use_separate_proj_weight, q_proj_weight, k_proj_weight, v_proj_weight)
    mask = _attn_mask(attn_mask, is_causal, tgt_len, key.shape[0], bsz * num_heads, q.dtype)
    kpm = None if key_padding_mask is None else _float_mask(key_padding_mask, "key_padding_mask", q.dtype)
    if bias_k is not None and bias_v is not None:
        k = _cat([k, bias_k.expand(1, bsz, embed_dim)], 0)
        v = _cat([v, bias_v.expand(1, bsz, embed_dim)], 0)
        mask = None if mask is None else np.pad(mask, ((0, 0), (0, 0), (0, 1)))
        kpm = None if kpm is None else np.pad(kpm, ((0, 0), (0, 1)))
    q = q.reshape(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)
    k = k.reshape(k.shape[0], bsz * num_heads, head_dim).transpose(0, 1)
    v = v.reshape(v.shape[0], bsz * num_heads, head_dim).transpose(0, 1)
    if add_zero_attn:
        zeros = np.zeros((bsz * num_heads, 1, head_dim), dtype=q.dtype)
        k, v = _cat([k, zeros], 1), _cat([v, zeros], 1)
        mask = None if mask is None else np.pad(mask, ((0, 0), (0, 0), (0, 1)))
        kpm = None if kpm is None else np.pad(kpm, ((0, 0), (0, 1)))
    src_len = k.shape[1]
    if kpm is not None:
        if kpm.shape != (bsz, src_len):
            raise AssertionError(f"expecting key_padding_mask shape of {(bsz, src_len)}, but got "
                                 f"{_tensor_size(kpm.shape)}")
        kpm = np.broadcast_to(kpm[:, None, None, :], (bsz, num_heads, 1, src_len)).reshape(-1, 1, src_len)
        mask = kpm if mask is None else mask + kpm
    scores = (q * float(np.sqrt(1.0 / head_dim))).matmul(k.transpose(1, 2))
    if mask is not None:
        scores = scores + mask
    weights = softmax(scores, dim=-1)
    if training and dropout_p > 0.0:
        weights = dropout(weights, p=dropout_p)
    out = weights.matmul(v).transpose(0, 1).reshape(tgt_len * bsz, embed_dim)
    out = linear(out, out_proj_weight, out_proj_bias).reshape(tgt_len, bsz, embed_dim)
    if not batched:
        out = out.squeeze(1)
    if not need_weights:
        return out, None
    weights = weights.reshape(bsz, num_heads, tgt_len, src_len)
    if average_attn_weights:
        weights = weights.mean(dim=1)
    return out, (weights if batched else weights.squeeze(0))


def _cat(parts, dim):
    from ..ops import shape as _S

    return _S.cat([p if isinstance(p, Variable) else Variable(p) for p in parts], dim)


def _in_projection(query, key, value, e, in_proj_weight, in_proj_bias, separate, wq, wk, wv):
    if not separate and query is key and key is value:  # self-attention: one packed projection, as PyTorch
        proj = linear(query, in_proj_weight, in_proj_bias)
        return proj[..., 0:e], proj[..., e:2 * e], proj[..., 2 * e:]
    if separate:
        return tuple(_NL.LinearRows.apply(x, w, in_proj_bias, bias_rows=(i * e, (i + 1) * e))
                     for i, (x, w) in enumerate(((query, wq), (key, wk), (value, wv))))
    return tuple(_NL.LinearRows.apply(x, in_proj_weight, in_proj_bias, rows=(i * e, (i + 1) * e),
                                      bias_rows=(i * e, (i + 1) * e))
                 for i, x in enumerate((query, key, value)))


def _attn_mask(attn_mask, is_causal, tgt_len, src_len, heads_batch, dtype):
    """The attention mask as a float (1 or heads_batch, L, S) array, with PyTorch's shape checks."""
    if attn_mask is None:
        if is_causal:
            raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the Transformer "
                               "module method `generate_square_subsequent_mask` to create this mask.")
        return None
    mask = _float_mask(attn_mask, "attn_mask", dtype)
    if mask.ndim == 2:
        if mask.shape != (tgt_len, src_len):
            raise RuntimeError(f"The shape of the 2D attn_mask is {_tensor_size(mask.shape)}, but should be "
                               f"{(tgt_len, src_len)}.")
        return mask[None]
    if mask.ndim == 3:
        if mask.shape != (heads_batch, tgt_len, src_len):
            raise RuntimeError(f"The shape of the 3D attn_mask is {_tensor_size(mask.shape)}, but should be "
                               f"{(heads_batch, tgt_len, src_len)}.")
        return mask
    raise RuntimeError(f"attn_mask's dimension {mask.ndim} is not supported")


# ----- losses ------------------------------------------------------------------------------------------------
def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None, reduction="mean",
                                     pos_weight=None):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if tuple(np.shape(_array(target))) != tuple(input.shape):
        raise ValueError(f"Target size ({_size(np.shape(_array(target)))}) must be the same as input size "
                         f"({_size(input.shape)})")
    return _NLoss.BinaryCrossEntropyWithLogits.apply(input, target, weight=_array(weight),
                                                     pos_weight=_array(pos_weight), reduction=reduction)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    _warn_target_size(input, target)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    if beta == 0.0:
        return _N.L1Loss.apply(input, target, reduction=reduction)
    return _NLoss.SmoothL1Loss.apply(input, target, reduction=reduction, beta=float(beta))


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    _warn_target_size(input, target)
    _N.check_reduction(reduction)
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    if weight is None:
        return _NLoss.HuberLoss.apply(input, target, reduction=reduction, delta=float(delta))
    if tuple(weight.shape) != tuple(input.shape):
        raise ValueError("Weights and input must have the same size.")
    loss = _NLoss.HuberLoss.apply(input, target, reduction="none", delta=float(delta)) * weight
    return loss if reduction == "none" else (loss.sum() if reduction == "sum" else loss.mean())


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce, "mean")
    elif reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the support size."
                      "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
                      "'mean' will be changed to behave the same as 'batchmean' in the next major release.",
                      UserWarning, stacklevel=2)
    if reduction not in ("mean", "sum", "none", "batchmean"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    op_reduction = "sum" if reduction == "batchmean" else reduction
    out = _NLoss.KlDiv.apply(input, target, reduction=op_reduction, log_target=bool(log_target))
    if reduction == "batchmean" and input.ndim != 0:
        out = out / input.shape[0]
    return out


# ----- interpolation ------------------------------------------------------------------------------------------
_LINEAR_FOR_DIMS = {1: "linear", 2: "bilinear"}


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resize the spatial dims (1 or 2 of them) by ``nearest``, ``nearest-exact``, ``linear``/``bilinear`` or
    ``area`` (adaptive average pooling), with PyTorch's source-index rules."""
    spatial = input.ndim - 2
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating modes: linear | bilinear | "
                             "bicubic | trilinear")
    elif mode in ("linear", "bilinear", "bicubic", "trilinear"):
        align_corners = bool(align_corners)
    else:
        raise UnsupportedError(f"gradviz's interpolate does not implement mode={mode!r}")
    if size is None and scale_factor is None:
        raise ValueError("either size or scale_factor should be defined")
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if spatial not in (1, 2) or mode in ("bicubic", "trilinear") or antialias:
        raise UnsupportedError(f"gradviz's interpolate handles 3-D and 4-D inputs in nearest, linear, bilinear and "
                               f"area modes (got {input.ndim}-D input, mode={mode!r}, antialias={antialias})")
    if mode in ("linear", "bilinear") and _LINEAR_FOR_DIMS[spatial] != mode:
        raise UnsupportedError(f"Got {input.ndim}D input, but {mode} mode needs {3 if mode == 'linear' else 4}D input")
    in_size = tuple(input.shape[2:])
    if size is not None:
        out_size = tuple(int(v) for v in (size if isinstance(size, (tuple, list)) else (size,) * spatial))
        scales = (None,) * spatial
    else:
        factors = tuple(scale_factor) if isinstance(scale_factor, (tuple, list)) else (scale_factor,) * spatial
        out_size = tuple(int(np.floor(n * float(f))) for n, f in zip(in_size, factors))
        scales = (None,) * spatial if recompute_scale_factor else tuple(float(f) for f in factors)
    if mode == "area":
        return adaptive_avg_pool2d(input, out_size) if spatial == 2 else adaptive_avg_pool1d(input, out_size[0])
    return _NP.Interpolate.apply(input, size=out_size, mode=mode, align_corners=bool(align_corners), scales=scales)


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    warnings.warn("`nn.functional.upsample` is deprecated. Use `nn.functional.interpolate` instead.", UserWarning,
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


# ----- distances and the embedding / ranking losses (built from the engine's ops) ------------------------------
def _reduced(loss, reduction):
    _N.check_reduction(reduction)
    if reduction == "mean":
        return loss.mean()
    return loss.sum() if reduction == "sum" else loss


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """``x1 . x2 / (max(||x1||, eps) * max(||x2||, eps))`` along ``dim``; the inputs are broadcast first, so a
    norm is taken over the broadcast tensor (PyTorch's order, which shapes the gradient)."""
    shape = np.broadcast_shapes(tuple(x1.shape), tuple(x2.shape))
    x1 = x1 if tuple(x1.shape) == shape else x1.expand(*shape)
    x2 = x2 if tuple(x2.shape) == shape else x2.expand(*shape)
    n1 = x1.norm(2, dim, keepdim=True).clamp(min=eps)
    n2 = x2.norm(2, dim, keepdim=True).clamp(min=eps)
    return ((x1 / n1) * (x2 / n2)).sum(dim)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """``||x1 - x2 + eps||_p`` over the last dim."""
    d = _p_norm(x1 - x2 + eps, float(p), -1)
    return d if keepdim else d.squeeze(-1)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False, size_average=None,
                        reduce=None, reduction="mean"):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = _A.Minimum.apply(d_neg, pairwise_distance(positive, negative, p, eps))
    return _reduced((d_pos - d_neg + margin).clamp(min=0), reduction)


def cosine_embedding_loss(input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"):
    """``1 - cos`` for pairs labelled 1, ``max(0, cos - margin)`` for pairs labelled -1."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    eps = 1e-12  # PyTorch's: inside the square root of the squared norms' product
    dot = (input1 * input2).sum(-1)
    cos = dot / (((input1 * input1).sum(-1) + eps) * ((input2 * input2).sum(-1) + eps)).sqrt()
    t = _array(target)
    loss = _where(t == 1, 1 - cos, 0.0) + _where(t == -1, (cos - margin).clamp(min=0), 0.0)
    return _reduced(loss, reduction)


def _where(condition, a, b):
    return _I.where(np.asarray(condition), a, b)


def margin_ranking_loss(input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if not (input1.ndim == input2.ndim == np.ndim(_array(target))):
        raise RuntimeError(f"margin_ranking_loss : All input tensors should have same dimension but got sizes: "
                           f"input1: {_tensor_size(input1.shape)}, input2: {_tensor_size(input2.shape)}, target: "
                           f"{_tensor_size(np.shape(_array(target)))} ")
    return _reduced((-target * (input1 - input2) + margin).clamp(min=0), reduction)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    t = _array(target)
    loss = _where(t == 1, input, 0.0) + _where(t == -1, (margin - input).clamp(min=0), 0.0)
    return _reduced(loss, reduction)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """``log(1 + exp(-y x))``."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    return _reduced(softplus(-target * input), reduction)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """Per sample: the mean over classes of ``-(y log sigmoid(x) + (1 - y) log sigmoid(-x))``."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    return _reduced(loss.mean(dim=input.ndim - 1), reduction)


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                     reduction="mean"):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    loss = input.exp() - target * input if log_input else input - target * (input + eps).log()
    if full:
        t = _array(target)
        stirling = np.where(t > 1, t * np.log(np.where(t > 1, t, 1)) - t + 0.5 * np.log(2 * np.pi * np.where(
            t > 1, t, 1)), 0.0).astype(input.dtype)
        loss = loss + stirling
    return _reduced(loss, reduction)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """``0.5 (log var + (x - y)^2 / var)``; ``var`` is clamped at ``eps`` without changing its gradient's path
    (PyTorch clamps a clone in place under no_grad)."""
    if not isinstance(var, Variable):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        var = Variable(np.full(tuple(input.shape), var, dtype=input.dtype))
    elif (var._data < 0).any():
        raise ValueError("var has negative entry/entries")
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = var.unsqueeze(-1)
        elif not (input.ndim == var.ndim and sum(v for i, v in zip(input.shape, var.shape) if i != v) == 1):
            raise ValueError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    var = var + Variable(np.maximum(var._data, eps) - var._data)
    loss = 0.5 * (var.log() + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * float(np.log(2 * np.pi))
    return _reduced(loss, reduction)


__all__ += ["gelu", "silu", "leaky_relu", "elu", "softplus", "hardtanh", "relu6", "batch_norm", "layer_norm",
            "group_norm", "dropout2d", "embedding", "avg_pool2d", "adaptive_avg_pool2d",
            "scaled_dot_product_attention", "multi_head_attention_forward", "binary_cross_entropy_with_logits",
            "smooth_l1_loss", "huber_loss", "kl_div", "conv1d", "max_pool1d", "avg_pool1d", "adaptive_avg_pool1d",
            "conv_transpose2d",
            "selu", "celu", "mish", "hardswish", "hardsigmoid", "logsigmoid", "softsign", "tanhshrink", "threshold",
            "prelu", "glu", "pad", "normalize", "instance_norm",
            "cosine_similarity", "pairwise_distance", "triplet_margin_loss", "cosine_embedding_loss",
            "margin_ranking_loss", "hinge_embedding_loss", "soft_margin_loss", "multilabel_soft_margin_loss",
            "poisson_nll_loss", "gaussian_nll_loss", "interpolate", "upsample",
            "adaptive_max_pool2d", "adaptive_max_pool1d", "softmin", "pixel_shuffle", "pixel_unshuffle",
            "embedding_bag", "unfold", "fold", "bilinear", "dropout1d", "dropout3d", "rms_norm"]
