"""Layers behind ``gradviz.nn`` that are one node each: embedding lookup and bags, channel-wise dropout, one projection
of a packed weight (attention's q, k, v), the transposed convolution, padding, and unfold/fold."""

import numpy as np

from ..autograd.function import Function
from .nn_ops import Dropout, _col2im, _im2col


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


class FeatureDropout(Dropout):
    """Dropout of whole channels: one draw per (sample, channel), kept ones scaled by 1/(1-p). Dropout's
    node otherwise (a multiplication by the scaled mask, as PyTorch records it)."""

    _op = "dropout2d"

    @staticmethod
    def _scaled_mask(x, p, rng):
        mask_shape = x.shape[:2] + (1,) * (x.ndim - 2)
        if p == 1:
            return np.zeros(mask_shape, dtype=x.dtype)
        keep = rng.random(mask_shape) >= p  # float64 draws: the stream seeded runs have always seen
        return keep.astype(x.dtype) * x.dtype.type(1.0 / (1.0 - p))


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


class EmbeddingBag(Function):
    """Sum, mean or max of the embedding rows in each bag (``bags[k]`` is element k's bag), without ever
    materialising the rows' intermediate tensor in the graph. Elements equal to ``padding_idx`` are left out
    (of the mean's count too); an empty bag gives zeros. ``per_sample_weights`` (mode sum) scale each row."""

    _raw = True

    @staticmethod
    def forward(ctx, weight, indices, per_sample_weights=None, bags=None, n_bags=0, mode="mean", padding_idx=None):
        if indices.size and (indices.min() < 0 or indices.max() >= weight.shape[0]):
            raise IndexError("index out of range in self")
        keep = np.ones(indices.shape, dtype=bool) if padding_idx is None else indices != padding_idx
        idx, bag = indices[keep], bags[keep]
        rows = weight[idx]
        if per_sample_weights is not None:
            rows = rows * per_sample_weights[keep][:, None]
        counts = np.bincount(bag, minlength=n_bags)
        out = np.zeros((n_bags, weight.shape[1]), dtype=weight.dtype)
        winner = None
        if mode == "max":
            out[:] = -np.inf
            np.maximum.at(out, bag, rows)
            out[counts == 0] = 0
            # the element that gave each (bag, dim) its max: the first one equal to it
            first = np.full(out.shape, len(idx), dtype=np.int64)
            hits = rows == out[bag]
            positions = np.broadcast_to(np.arange(len(idx))[:, None], rows.shape)
            np.minimum.at(first, (np.broadcast_to(bag[:, None], rows.shape)[hits],
                                  np.broadcast_to(np.arange(rows.shape[1]), rows.shape)[hits]), positions[hits])
            picked = idx[np.minimum(first, len(idx) - 1)] if len(idx) else np.full(out.shape, -1)
            winner = np.where(counts[:, None] > 0, picked, -1)
        else:
            np.add.at(out, bag, rows)
            if mode == "mean":
                out /= np.maximum(counts, 1)[:, None].astype(out.dtype)
        need = ctx.needs_input_grad
        if any(need):
            ctx.save_for_backward(weight if need[2] else None, per_sample_weights)
        ctx._bag = (weight.shape, idx, bag, counts, winner, mode, keep)
        ctx._meta = {"mode": mode}
        return out

    @staticmethod
    def backward(ctx, grad):
        weight, per_sample_weights = ctx.saved_tensors
        shape, idx, bag, counts, winner, mode, keep = ctx._bag
        need = ctx.needs_input_grad
        gw = gp = None
        if need[0]:
            gw = np.zeros(shape, dtype=grad.dtype)
            if mode == "max":
                has = winner >= 0
                np.add.at(gw, (winner[has], np.nonzero(has)[1]), grad[has])
            else:
                rows = grad[bag]
                if mode == "mean":
                    rows = rows / counts[bag][:, None]
                if per_sample_weights is not None:
                    rows = rows * per_sample_weights[keep][:, None]
                np.add.at(gw, idx, rows)
        if len(need) > 2 and need[2]:
            gp = np.zeros(keep.shape, dtype=grad.dtype)
            gp[keep] = (grad[bag] * weight[idx]).sum(axis=1)
        return gw, None, gp


class Unfold(Function):
    """Sliding blocks to columns (im2col): (N, C, H, W) -> (N, C*kH*kW, L), L blocks in row-major order.
    Its backward adds each column back onto the pixels it came from; ``Fold`` is the same pair reversed."""

    _raw = True

    @staticmethod
    def forward(ctx, x, kernel, dilation, pads, stride, out_hw):
        n = x.shape[0]
        cols = _im2col(x, kernel, stride, dilation, pads, out_hw)
        ctx._geometry = (x.shape, kernel, stride, pads, dilation, out_hw)
        ctx._meta = {"kernel_size": tuple(kernel), "stride": tuple(stride), "dilation": tuple(dilation)}
        return np.ascontiguousarray(cols.reshape(n, out_hw[0] * out_hw[1], -1).transpose(0, 2, 1))

    @staticmethod
    def backward(ctx, grad):
        x_shape, kernel, stride, pads, dilation, out_hw = ctx._geometry
        dcols = grad.transpose(0, 2, 1).reshape(-1, grad.shape[1])
        return _col2im(dcols, x_shape, kernel, stride, pads, dilation, out_hw)


class Fold(Function):
    """Columns back to an image, summing overlaps (col2im): (N, C*kH*kW, L) -> (N, C, H, W)."""

    _raw = True

    @staticmethod
    def forward(ctx, cols, image_shape, kernel, dilation, pads, stride, out_hw):
        dcols = cols.transpose(0, 2, 1).reshape(-1, cols.shape[1])
        ctx._geometry = (image_shape, kernel, stride, pads, dilation, out_hw)
        ctx._meta = {"kernel_size": tuple(kernel), "stride": tuple(stride), "dilation": tuple(dilation)}
        return np.ascontiguousarray(_col2im(dcols, image_shape, kernel, stride, pads, dilation, out_hw))

    @staticmethod
    def backward(ctx, grad):
        image_shape, kernel, stride, pads, dilation, out_hw = ctx._geometry
        cols = _im2col(grad, kernel, stride, dilation, pads, out_hw)
        return cols.reshape(image_shape[0], out_hw[0] * out_hw[1], -1).transpose(0, 2, 1)
