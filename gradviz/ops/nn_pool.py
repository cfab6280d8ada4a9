"""Pooling and resampling behind ``gradviz.nn``: average pooling, adaptive average and max pooling, and
interpolation. Adaptive average pooling and interpolation treat each axis on its own, so both are one
separable map: ``rows @ x @ cols.T``."""

import math

import numpy as np

from ..autograd.function import Function
from ..errors import ShapeError
from .nn_ops import _pad, _windows, pool_out_size


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
