"""Layers behind ``gradviz.nn`` that are one node each: embedding lookup, average pooling (fixed and adaptive)
and channel-wise dropout."""

import math

import numpy as np

from ..autograd.function import Function
from ..errors import ShapeError
from .nn_ops import _col2im, _im2col, _pad, _windows, pool_out_size


class Embedding(Function):
    """Rows of ``weight`` picked by integer ``indices``; the gradient of a row sums over its occurrences, and
    the ``padding_idx`` row gets none (PyTorch's ``EmbeddingBackward``)."""

    _raw = True

    @staticmethod
    def forward(ctx, weight, indices, padding_idx=None, scale_grad_by_freq=False):
        if indices.size and (indices.min() < 0 or indices.max() >= weight.shape[0]):
            raise IndexError("index out of range in self")
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(indices)
        ctx._embedding = (weight.shape, padding_idx, scale_grad_by_freq)
        ctx._meta = {"padding_idx": padding_idx}
        return weight[indices]

    @staticmethod
    def backward(ctx, grad, *_):
        (indices,) = ctx.saved_tensors
        shape, padding_idx, by_freq = ctx._embedding
        flat = indices.reshape(-1)
        rows = grad.reshape(-1, shape[1])
        if by_freq:
            counts = np.bincount(flat, minlength=shape[0])
            rows = rows / counts[flat][:, None]
        gw = np.zeros(shape, dtype=grad.dtype)
        np.add.at(gw, flat, rows)
        if padding_idx is not None:
            gw[padding_idx] = 0
        return gw, None


def _avg_divisors(size, kernel, stride, pad, out, count_include_pad):
    """For each output position along one axis: the window's length as PyTorch divides by it."""
    start = np.arange(out) * stride - pad
    end = np.minimum(start + kernel, size + pad)
    with_pad = end - start
    inside = np.minimum(end, size) - np.maximum(start, 0)
    return with_pad if count_include_pad else inside


class AvgPool2d(Function):
    """Mean over each window (zero padding counted or not, ``ceil_mode``'s partial windows, or a fixed
    ``divisor_override``)."""

    _raw = True

    @staticmethod
    def forward(ctx, x, kernel, stride, padding, ceil_mode=False, count_include_pad=True, divisor_override=None):
        n, c, h, w = x.shape
        out_hw = tuple(pool_out_size(s, k, st, p, 1, ceil_mode)
                       for s, k, st, p in zip((h, w), kernel, stride, padding))
        if out_hw[0] <= 0 or out_hw[1] <= 0:
            raise ShapeError(f"Given input size: ({c}x{h}x{w}). Calculated output size: ({c}x{out_hw[0]}x"
                             f"{out_hw[1]}). Output size is too small")
        extra = tuple(max(0, (o - 1) * st + k - (s + 2 * p))
                      for o, st, k, s, p in zip(out_hw, stride, kernel, (h, w), padding))
        pads = (padding[0], padding[0] + extra[0], padding[1], padding[1] + extra[1])
        sums = _windows(_pad(x, pads), kernel, stride, (1, 1), out_hw).sum(axis=(4, 5))
        if divisor_override:
            div = np.full(out_hw, float(divisor_override))
        else:
            div = np.multiply.outer(
                _avg_divisors(h, kernel[0], stride[0], padding[0], out_hw[0], count_include_pad),
                _avg_divisors(w, kernel[1], stride[1], padding[1], out_hw[1], count_include_pad))
        div = div.astype(x.dtype)
        ctx._pool = (x.shape, kernel, stride, pads, out_hw, div)
        ctx._meta = {"kernel_size": tuple(kernel), "stride": tuple(stride), "padding": tuple(padding),
                     "ceil_mode": ceil_mode, "count_include_pad": count_include_pad}
        return np.asarray(sums / div, dtype=x.dtype)

    @staticmethod
    def backward(ctx, grad):
        (n, c, h, w), kernel, stride, pads, (oh, ow), div = ctx._pool
        g = grad / div
        gxp = np.zeros((n, c, h + pads[0] + pads[1], w + pads[2] + pads[3]), dtype=grad.dtype)
        for i in range(kernel[0]):  # a loop over kernel taps, each a strided slice of the whole input
            for j in range(kernel[1]):
                gxp[:, :, i:i + stride[0] * (oh - 1) + 1:stride[0], j:j + stride[1] * (ow - 1) + 1:stride[1]] += g
        return gxp[:, :, pads[0]:pads[0] + h, pads[2]:pads[2] + w]


def _adaptive_matrix(size, out, dtype):
    """(out, size): row i averages input positions floor(i*size/out) .. ceil((i+1)*size/out) - 1."""
    m = np.zeros((out, size), dtype=dtype)
    for i in range(out):
        start, end = (i * size) // out, math.ceil((i + 1) * size / out)
        m[i, start:end] = 1.0 / (end - start)
    return m


class _SeparableMap(Function):
    """``y = rows @ x @ cols.T`` over the last two dims (``rows`` None: the last dim only): resampling that
    treats each axis on its own, as adaptive average pooling and interpolation do. Backward is the transpose."""

    _raw = True

    @staticmethod
    def forward(ctx, x, rows=None, cols=None):
        ctx._mats = (rows, cols)
        y = x if rows is None else np.matmul(rows, x)
        return np.matmul(y, cols.T)

    @staticmethod
    def backward(ctx, grad):
        rows, cols = ctx._mats
        g = np.matmul(grad, cols)
        return g if rows is None else np.matmul(rows.T, g)


class AdaptiveAvgPool2d(_SeparableMap):
    """Average pooling to a fixed output size. A rectangle's mean is a row mean of column means, so the op is
    two small matmuls: ``A_h @ x @ A_w.T``."""

    @staticmethod
    def forward(ctx, x, output_size):
        oh, ow = output_size
        ctx._meta = {"output_size": (oh, ow)}
        return _SeparableMap.forward(ctx, x, _adaptive_matrix(x.shape[-2], oh, x.dtype),
                                     _adaptive_matrix(x.shape[-1], ow, x.dtype))


def _interpolation_matrix(size, out, mode, align_corners, scale, dtype):
    """(out, size): how each output position mixes the input positions along one axis (PyTorch's rules)."""
    dst = np.arange(out, dtype=np.float64)
    m = np.zeros((out, size), dtype=dtype)
    if mode in ("nearest", "nearest-exact"):
        ratio = 1.0 / scale if scale else size / out
        src = np.floor((dst + (0.5 if mode == "nearest-exact" else 0.0)) * ratio).astype(np.int64)
        m[np.arange(out), np.minimum(src, size - 1)] = 1.0
        return m
    if align_corners:
        src = dst * ((size - 1) / (out - 1)) if out > 1 else np.zeros(out)
    else:
        ratio = 1.0 / scale if scale else size / out
        src = np.maximum((dst + 0.5) * ratio - 0.5, 0.0)
    low = np.minimum(np.floor(src).astype(np.int64), size - 1)
    high = np.minimum(low + 1, size - 1)
    frac = src - low
    np.add.at(m, (np.arange(out), low), 1.0 - frac)
    np.add.at(m, (np.arange(out), high), frac)
    return m


class Interpolate(_SeparableMap):
    """Nearest or (bi)linear resampling of the last one or two dims."""

    @staticmethod
    def forward(ctx, x, size=(), mode="nearest", align_corners=False, scales=()):
        mats = [_interpolation_matrix(n, o, mode, align_corners, sc, x.dtype)
                for n, o, sc in zip(x.shape[-len(size):], size, scales)]
        ctx._meta = {"size": tuple(size), "mode": mode, "align_corners": align_corners}
        return _SeparableMap.forward(ctx, x, *(([None] if len(mats) == 1 else []) + mats))

    @classmethod
    def name(cls):
        return "UpsampleBackward"


class FeatureDropout(Function):
    """Dropout of whole channels: one draw per (sample, channel), kept ones scaled by 1/(1-p). Recorded, as
    PyTorch records it, as a multiplication by the scaled mask."""

    _raw = True

    @staticmethod
    def forward(ctx, x, p=0.5, rng=None):
        mask_shape = x.shape[:2] + (1,) * (x.ndim - 2)
        if p == 1:
            scaled = np.zeros(mask_shape, dtype=x.dtype)
        else:
            keep = rng.random(mask_shape) >= p
            scaled = keep.astype(x.dtype) * x.dtype.type(1.0 / (1.0 - p))
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(scaled)
        ctx._meta = {"op": "dropout2d", "p": p}
        return x * scaled

    @staticmethod
    def backward(ctx, grad):
        (scaled,) = ctx.saved_tensors
        return grad * scaled

    @classmethod
    def name(cls):
        return "MulBackward"


class LinearRows(Function):
    """``x @ weight[rows].T + bias[bias_rows]``: one projection of a packed weight and bias (attention's q, k
    and v share ``in_proj_weight`` and ``in_proj_bias``). One node that reads the rows directly, so the
    gradients arrive whole (zeros outside the rows) and no slice of a parameter becomes a graph of its own."""

    _raw = True

    @staticmethod
    def forward(ctx, x, weight, bias=None, rows=(0, None), bias_rows=(0, None)):
        start, stop = rows
        x2 = x.reshape(-1, x.shape[-1])
        out = np.matmul(x2, weight[start:stop].T)
        if bias is not None:
            out += bias[bias_rows[0]:bias_rows[1]]
        need = ctx.needs_input_grad
        if any(need):
            ctx.save_for_backward(x if need[1] else None, weight if need[0] else None)
        ctx._rows = (x.shape, weight.shape, rows, None if bias is None else (bias.shape, bias_rows))
        ctx._meta = {"rows": f"[{start}:{'' if stop is None else stop}]"}
        return out.reshape(x.shape[:-1] + (out.shape[-1],))

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        x_shape, w_shape, (start, stop), bias_layout = ctx._rows
        need = ctx.needs_input_grad
        g2 = grad.reshape(-1, grad.shape[-1])
        gx = np.matmul(g2, weight[start:stop]).reshape(x_shape) if weight is not None else None
        gw = gb = None
        if x is not None:
            gw = np.zeros(w_shape, dtype=grad.dtype)
            gw[start:stop] = np.matmul(g2.T, x.reshape(-1, x_shape[-1]))
        if len(need) > 2 and need[2]:
            b_shape, (b_start, b_stop) = bias_layout
            gb = np.zeros(b_shape, dtype=grad.dtype)
            gb[b_start:b_stop] = g2.sum(axis=0)
        return gx, gw, gb

    @classmethod
    def name(cls):
        return "AddmmBackward"


class ConvolutionTranspose(Function):
    """2-d transposed convolution (the gradient of a convolution with respect to its input): each input pixel
    spreads ``weight``-scaled copies over a window of the output. Forward is one matmul and a col2im; backward
    one im2col and two matmuls. PyTorch's node is ``ConvolutionBackward`` too (with ``transposed=True``)."""

    _raw = True

    @staticmethod
    def forward(ctx, x, weight, bias=None, stride=(1, 1), padding=(0, 0), output_padding=(0, 0), dilation=(1, 1)):
        n, cin, h, w = x.shape
        cout, kernel = weight.shape[1], weight.shape[2:]
        out_hw = tuple((s - 1) * st - 2 * p + d * (k - 1) + op + 1
                       for s, st, p, d, k, op in zip((h, w), stride, padding, dilation, kernel, output_padding))
        pads = (padding[0], padding[0], padding[1], padding[1])
        rows = x.transpose(0, 2, 3, 1).reshape(n * h * w, cin)
        cols = np.matmul(rows, weight.reshape(cin, -1))
        out = _col2im(cols, (n, cout) + out_hw, kernel, stride, pads, dilation, (h, w))
        if bias is not None:
            out = out + bias.reshape(1, -1, 1, 1)
        need = ctx.needs_input_grad
        if need[0] or need[1]:
            ctx.save_for_backward(x if need[1] else None, weight if need[0] else None)
        ctx._geometry = (x.shape, kernel, stride, pads, dilation)
        ctx._meta = {"stride": tuple(stride), "padding": tuple(padding), "output_padding": tuple(output_padding),
                     "dilation": tuple(dilation), "transposed": True}
        return np.ascontiguousarray(out)

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        (n, cin, h, w), kernel, stride, pads, dilation = ctx._geometry
        gcols = _im2col(grad, kernel, stride, dilation, pads, (h, w))  # (N*H*W, Cout*KH*KW)
        gx = gw = gb = None
        if weight is not None:
            gx = np.matmul(gcols, weight.reshape(cin, -1).T).reshape(n, h, w, cin).transpose(0, 3, 1, 2)
        if x is not None:
            rows = x.transpose(0, 2, 3, 1).reshape(n * h * w, cin)
            gw = np.matmul(rows.T, gcols).reshape((cin, grad.shape[1]) + tuple(kernel))
        if len(ctx.needs_input_grad) > 2 and ctx.needs_input_grad[2]:
            gb = grad.sum(axis=(0, 2, 3))
        return gx, gw, gb


def _source_index(size, low, high, mode):
    """For each position of a padded axis: the input position it copies (-1: the constant fill)."""
    i = np.arange(-low, size + high)
    if mode == "constant":
        return np.where((i >= 0) & (i < size), i, -1)
    if mode == "reflect":
        period = 2 * (size - 1)
        i = np.abs(np.mod(i, period)) if period else np.zeros_like(i)
        return np.where(i >= size, period - i, i)
    if mode == "replicate":
        return np.clip(i, 0, size - 1)
    return np.mod(i, size)  # circular


class Pad(Function):
    """``F.pad``: each listed axis extended (or cropped, for a negative amount) by a constant, its reflection,
    its edge value or its wrap-around. Forward gathers along each axis; backward scatter-adds back."""

    _raw = True

    @staticmethod
    def forward(ctx, x, pads=(), mode="constant", value=0.0):
        maps = []
        out = x
        for axis, (low, high) in pads:
            idx = _source_index(x.shape[axis], low, high, mode)
            out = np.take(out, np.maximum(idx, 0), axis=axis)
            if mode == "constant" and (idx < 0).any():
                where = [slice(None)] * out.ndim
                where[axis] = idx < 0
                out[tuple(where)] = value
            maps.append((axis, idx, x.shape[axis]))
        ctx._maps = maps
        ctx._meta = {"pad": [list(p) for _, p in pads], "mode": mode}
        return out

    @staticmethod
    def backward(ctx, grad):
        g = grad
        for axis, idx, size in reversed(ctx._maps):
            keep = idx >= 0
            shape = list(g.shape)
            shape[axis] = size
            back = np.zeros(shape, dtype=grad.dtype)
            where = [slice(None)] * g.ndim
            where[axis] = keep
            lead = (slice(None),) * axis
            np.add.at(back, lead + (idx[keep],), g[tuple(where)])
            g = back
        return g


def _adaptive_bins(size, out):
    """PyTorch's adaptive pooling bins along one axis: [floor(i*size/out), ceil((i+1)*size/out))."""
    return [((i * size) // out, -((-(i + 1) * size) // out)) for i in range(out)]


class AdaptiveMaxPool2d(Function):
    """Max over each adaptive bin (bins may overlap); returns (values, indices into each input plane). A loop
    over the output bins, each a max over the whole batch and all channels at once."""

    _raw = True

    @staticmethod
    def forward(ctx, x, output_size):
        n, c, h, w = x.shape
        oh, ow = output_size
        values = np.empty((n, c, oh, ow), dtype=x.dtype)
        indices = np.empty((n, c, oh, ow), dtype=np.int64)
        for i, (r0, r1) in enumerate(_adaptive_bins(h, oh)):
            for j, (c0, c1) in enumerate(_adaptive_bins(w, ow)):
                window = x[:, :, r0:r1, c0:c1].reshape(n, c, -1)
                arg = window.argmax(axis=-1)
                values[:, :, i, j] = np.take_along_axis(window, arg[..., None], axis=-1)[..., 0]
                indices[:, :, i, j] = (r0 + arg // (c1 - c0)) * w + c0 + arg % (c1 - c0)
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(indices)
        ctx._shape = x.shape
        ctx._meta = {"output_size": (oh, ow)}
        ctx.mark_non_differentiable(indices)
        return values, indices

    @staticmethod
    def backward(ctx, grad, _grad_indices=None):
        (indices,) = ctx.saved_tensors
        n, c, h, w = ctx._shape
        flat = (indices + (np.arange(n * c) * (h * w)).reshape(n, c, 1, 1)).ravel()
        gx = np.bincount(flat, weights=grad.ravel(), minlength=n * c * h * w).astype(grad.dtype)
        return gx.reshape(n, c, h, w)
