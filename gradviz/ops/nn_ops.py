"""The ops behind ``gradviz.nn``: linear layers, convolution, pooling, dropout and the losses.

Each is one graph node whose backward needs only what forward saved given ``ctx.needs_input_grad``, so a
frozen layer fed an input that does not require grad records no node and keeps no buffers. Argument checking
that PyTorch does with a message of its own lives here too, with PyTorch's wording.
"""

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..autograd.function import Function
from ..dtypes import promote_pair
from ..errors import DtypeError, ShapeError

_TORCH_SCALAR = {"float32": "float", "float64": "double", "int64": "long", "int32": "int", "bool": "bool"}


def _scalar_name(dtype):
    return _TORCH_SCALAR.get(str(dtype), str(dtype))


# ----- linear ---------------------------------------------------------------------------------------------
class Addmm(Function):
    """``x @ weight.T + bias`` in one node (PyTorch's ``AddmmBackward``); inputs may have leading batch dims."""

    _raw = True

    @staticmethod
    def forward(ctx, x, weight, bias=None):
        _check_linear(x, weight)
        x2 = x.reshape(-1, x.shape[-1]) if x.ndim != 2 else x
        out = np.matmul(x2, weight.T)
        if bias is not None:
            out += bias
        need = ctx.needs_input_grad
        if need[0] or need[1]:
            ctx.save_for_backward(weight if need[0] else None, x if need[1] else None)
        ctx._x_shape = x.shape
        ctx._vector_bias = bias is None or bias.ndim == 1
        return out.reshape(x.shape[:-1] + (weight.shape[0],)) if x.ndim != 2 else out

    @staticmethod
    def backward(ctx, grad):
        weight, x = ctx.saved_tensors
        g2 = grad.reshape(-1, grad.shape[-1]) if grad.ndim != 2 else grad
        gx = np.matmul(g2, weight).reshape(ctx._x_shape) if weight is not None else None
        gw = np.matmul(g2.T, x.reshape(-1, x.shape[-1])) if x is not None else None
        gb = None
        if len(ctx.needs_input_grad) > 2 and ctx.needs_input_grad[2]:
            # a bias of the output's shape (the recurrent layers' x W_ih^T + b): the engine sums the gradient down
            gb = g2.sum(axis=0) if ctx._vector_bias else grad
        return gx, gw, gb


class Mm(Addmm):
    """``x @ weight.T`` for a linear layer without bias (PyTorch's ``MmBackward``)."""


def _check_linear(x, weight):
    if x.ndim == 0 or x.shape[-1] != weight.shape[1]:
        rows = int(np.prod(x.shape[:-1])) if x.ndim > 1 else 1
        cols = x.shape[-1] if x.ndim else 1
        raise ShapeError(f"mat1 and mat2 shapes cannot be multiplied ({rows}x{cols} and "
                         f"{weight.shape[1]}x{weight.shape[0]})")
    if x.dtype != weight.dtype:
        raise DtypeError(f"expected m1 and m2 to have the same dtype, but got: {_scalar_name(x.dtype)} != "
                         f"{_scalar_name(weight.dtype)}")


# ----- convolution ----------------------------------------------------------------------------------------
def _windows(xp, kernel, stride, dilation, out_hw):
    """A read-only (N, C, OH, OW, KH, KW) view of every receptive field of the padded input ``xp``."""
    sn, sc, sh, sw = xp.strides
    shape = xp.shape[:2] + tuple(out_hw) + tuple(kernel)
    strides = (sn, sc, sh * stride[0], sw * stride[1], sh * dilation[0], sw * dilation[1])
    return as_strided(xp, shape=shape, strides=strides, writeable=False)


def _pad(x, pads, value=0):
    top, bottom, left, right = pads
    if not (top or bottom or left or right):
        return x
    return np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)), constant_values=value)


def _out_size(size, pad_total, kernel, stride, dilation):
    return (size + pad_total - dilation * (kernel - 1) - 1) // stride + 1


def _im2col(x, kernel, stride, dilation, pads, out_hw):
    """Rows of (N*OH*OW, C*KH*KW): one receptive field per output pixel."""
    windows = _windows(_pad(x, pads), kernel, stride, dilation, out_hw)
    n, c = x.shape[:2]
    return windows.transpose(0, 2, 3, 1, 4, 5).reshape(n * out_hw[0] * out_hw[1], c * kernel[0] * kernel[1])


class Convolution(Function):
    """2-d cross-correlation (PyTorch's ``ConvolutionBackward``) via im2col: one matmul forward, two back."""

    _raw = True

    @staticmethod
    def forward(ctx, x, weight, bias=None, stride=(1, 1), pads=(0, 0, 0, 0), dilation=(1, 1)):
        out_hw = _check_conv(x, weight, stride, pads, dilation)
        kernel = weight.shape[2:]
        n, o = x.shape[0], weight.shape[0]
        cols = _im2col(x, kernel, stride, dilation, pads, out_hw)
        out = np.matmul(cols, weight.reshape(o, -1).T)
        if bias is not None:
            out += bias
        need = ctx.needs_input_grad
        if need[0] or need[1]:
            ctx.save_for_backward(x if need[1] else None, weight if need[0] else None)
        ctx._geometry = (x.shape, kernel, stride, pads, dilation, out_hw)
        ctx._meta = {"stride": tuple(stride), "padding": tuple(pads), "dilation": tuple(dilation)}
        return np.ascontiguousarray(out.reshape(n, out_hw[0], out_hw[1], o).transpose(0, 3, 1, 2))

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        x_shape, kernel, stride, pads, dilation, out_hw = ctx._geometry
        o = grad.shape[1]
        g2 = grad.transpose(0, 2, 3, 1).reshape(-1, o)
        gx = gw = gb = None
        if x is not None:
            cols = _im2col(x, kernel, stride, dilation, pads, out_hw)
            gw = np.matmul(g2.T, cols).reshape((o, x_shape[1]) + tuple(kernel))
        if weight is not None:
            dcols = np.matmul(g2, weight.reshape(o, -1))
            gx = _col2im(dcols, x_shape, kernel, stride, pads, dilation, out_hw)
        if len(ctx.needs_input_grad) > 2 and ctx.needs_input_grad[2]:
            gb = grad.sum(axis=(0, 2, 3))
        return gx, gw, gb


def _col2im(dcols, x_shape, kernel, stride, pads, dilation, out_hw):
    """Scatter-add receptive-field gradients back onto the input: a loop over kernel taps, not pixels."""
    n, c, h, w = x_shape
    top, bottom, left, right = pads
    oh, ow = out_hw
    kh, kw = kernel
    fields = dcols.reshape(n, oh, ow, c, kh, kw).transpose(0, 3, 4, 5, 1, 2)  # (N, C, KH, KW, OH, OW)
    gxp = np.zeros((n, c, h + top + bottom, w + left + right), dtype=dcols.dtype)
    for i in range(kh):
        r0 = i * dilation[0]
        for j in range(kw):
            c0 = j * dilation[1]
            gxp[:, :, r0:r0 + stride[0] * (oh - 1) + 1:stride[0], c0:c0 + stride[1] * (ow - 1) + 1:stride[1]] \
                += fields[:, :, i, j]
    return gxp[:, :, top:top + h, left:left + w]


def _check_conv(x, weight, stride, pads, dilation):
    if x.ndim != 4:
        raise ShapeError(f"Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: "
                         f"{list(x.shape)}")
    if x.shape[1] != weight.shape[1]:
        raise ShapeError(f"Given groups=1, weight of size {list(weight.shape)}, expected input{list(x.shape)} to "
                         f"have {weight.shape[1]} channels, but got {x.shape[1]} channels instead")
    if x.dtype != weight.dtype:
        raise DtypeError(f"expected scalar type {_scalar_name(x.dtype).title()} but found "
                         f"{_scalar_name(weight.dtype).title()}")
    padded = (x.shape[2] + pads[0] + pads[1], x.shape[3] + pads[2] + pads[3])
    effective = tuple(d * (k - 1) + 1 for d, k in zip(dilation, weight.shape[2:]))
    if padded[0] < effective[0] or padded[1] < effective[1]:
        raise ShapeError(f"Calculated padded input size per channel: ({padded[0]} x {padded[1]}). Kernel size: "
                         f"({effective[0]} x {effective[1]}). Kernel size can't be greater than actual input "
                         "size")
    return (_out_size(x.shape[2], pads[0] + pads[1], weight.shape[2], stride[0], dilation[0]),
            _out_size(x.shape[3], pads[2] + pads[3], weight.shape[3], stride[1], dilation[1]))


# ----- pooling --------------------------------------------------------------------------------------------
def pool_out_size(size, kernel, stride, pad, dilation, ceil_mode):
    """PyTorch's pooling output size, including ceil_mode's rule that a window must start inside the input."""
    span = size + 2 * pad - dilation * (kernel - 1) - 1
    out = (span + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return out


class MaxPool2DWithIndices(Function):
    """Max pooling; forward returns (values, indices into each input plane) like PyTorch's op."""

    _raw = True

    @staticmethod
    def forward(ctx, x, kernel, stride, padding, dilation, ceil_mode):
        n, c, h, w = x.shape
        out_hw = tuple(pool_out_size(s, k, st, p, d, ceil_mode)
                       for s, k, st, p, d in zip((h, w), kernel, stride, padding, dilation))
        if out_hw[0] <= 0 or out_hw[1] <= 0:
            raise ShapeError(f"Given input size: ({c}x{h}x{w}). Calculated output size: ({c}x{out_hw[0]}x"
                             f"{out_hw[1]}). Output size is too small")
        # Right/bottom padding so that ceil_mode's last, partial windows fit; -inf never wins a max.
        extra = tuple(max(0, (o - 1) * st + d * (k - 1) + 1 - (s + 2 * p))
                      for o, st, d, k, s, p in zip(out_hw, stride, dilation, kernel, (h, w), padding))
        pads = (padding[0], padding[0] + extra[0], padding[1], padding[1] + extra[1])
        fill = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
        xp = _pad(x, pads, fill)
        fields = _windows(xp, kernel, stride, dilation, out_hw).reshape(n, c, out_hw[0], out_hw[1], -1)
        arg = fields.argmax(axis=-1)
        values = np.take_along_axis(fields, arg[..., None], axis=-1)[..., 0]
        rows = np.arange(out_hw[0])[:, None] * stride[0] + (arg // kernel[1]) * dilation[0] - padding[0]
        cols = np.arange(out_hw[1])[None, :] * stride[1] + (arg % kernel[1]) * dilation[1] - padding[1]
        indices = rows * w + cols  # position in the unpadded (H, W) plane, as PyTorch reports it
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(x, indices)
        overlap = any(st < d * (k - 1) + 1 for st, d, k in zip(stride, dilation, kernel))
        ctx._pool = (x.shape, overlap)
        ctx._meta = {"kernel_size": tuple(kernel), "stride": tuple(stride), "padding": tuple(padding),
                     "dilation": tuple(dilation), "ceil_mode": ceil_mode}
        ctx.mark_non_differentiable(indices)
        return values, indices

    @staticmethod
    def backward(ctx, grad, _grad_indices=None):
        x, indices = ctx.saved_tensors
        (n, c, h, w), overlap = ctx._pool
        planes = (np.arange(n * c) * (h * w)).reshape(n, c, 1, 1)
        flat = (indices + planes).ravel()
        if overlap:  # overlapping windows may pick one element twice: accumulate
            gx = np.bincount(flat, weights=grad.ravel(), minlength=n * c * h * w).astype(grad.dtype)
        else:
            gx = np.zeros(n * c * h * w, dtype=grad.dtype)
            gx[flat] = grad.ravel()
        return gx.reshape(n, c, h, w)


# ----- dropout --------------------------------------------------------------------------------------------
class Dropout(Function):
    """Zero each element with probability ``p`` and scale the rest by 1/(1-p). PyTorch records this as a
    multiplication by the scaled mask, hence the node name ``MulBackward``."""

    _raw = True
    _op = "dropout"

    @classmethod
    def forward(cls, ctx, x, p=0.5, rng=None):
        scaled = cls._scaled_mask(x, p, rng)
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(scaled)
        ctx._meta = {"op": cls._op, "p": p}
        return x * scaled

    @staticmethod
    def _scaled_mask(x, p, rng):
        if p == 1:
            return np.zeros_like(x)
        keep = rng.random(x.shape, dtype=np.float32 if x.dtype == np.float32 else np.float64) >= p
        return keep.astype(x.dtype) * x.dtype.type(1.0 / (1.0 - p))

    @staticmethod
    def backward(ctx, grad):
        (scaled,) = ctx.saved_tensors
        return grad * scaled

    @classmethod
    def name(cls):
        return "MulBackward"


# ----- losses ---------------------------------------------------------------------------------------------
REDUCTIONS = ("mean", "sum", "none")


def check_reduction(reduction):
    if reduction not in REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")


def _reduce(loss, reduction):
    if reduction == "mean":
        return np.asarray(loss.mean(), dtype=loss.dtype)
    if reduction == "sum":
        return np.asarray(loss.sum(), dtype=loss.dtype)
    return loss


def _spread(grad, shape, reduction):
    """The gradient of the reduced loss with respect to each element of the unreduced loss."""
    if reduction == "mean":
        return np.broadcast_to(grad / int(np.prod(shape)), shape)
    if reduction == "sum":
        return np.broadcast_to(grad, shape)
    return grad


class MseLoss(Function):
    _raw = True

    @staticmethod
    def forward(ctx, x, target, reduction="mean"):
        diff = np.subtract(*promote_pair(x, target))  # PyTorch's promotion: an int64 target keeps float32
        if ctx.needs_input_grad[0] or ctx.needs_input_grad[1]:
            ctx.save_for_backward(diff)
        ctx._reduction = reduction
        ctx._meta = {"reduction": reduction}
        return _reduce(diff * diff, reduction)

    @staticmethod
    def backward(ctx, grad):
        (diff,) = ctx.saved_tensors
        g = 2 * diff * _spread(grad, diff.shape, ctx._reduction)
        return g, (-g if ctx.needs_input_grad[1] else None)


class L1Loss(Function):
    _raw = True

    @staticmethod
    def forward(ctx, x, target, reduction="mean"):
        diff = np.subtract(*promote_pair(x, target))  # PyTorch's promotion: an int64 target keeps float32
        if ctx.needs_input_grad[0] or ctx.needs_input_grad[1]:
            ctx.save_for_backward(diff)
        ctx._reduction = reduction
        ctx._meta = {"reduction": reduction}
        return _reduce(np.abs(diff), reduction)

    @staticmethod
    def backward(ctx, grad):
        (diff,) = ctx.saved_tensors
        g = np.sign(diff) * _spread(grad, diff.shape, ctx._reduction)
        return g, (-g if ctx.needs_input_grad[1] else None)


class BinaryCrossEntropy(Function):
    """``-w (t log x + (1 - t) log(1 - x))`` with each log clamped at -100, as PyTorch does."""

    _raw = True

    @staticmethod
    def forward(ctx, x, target, weight=None, reduction="mean"):
        if np.any((x < 0) | (x > 1)):
            raise RuntimeError("all elements of input should be between 0 and 1")
        with np.errstate(divide="ignore"):
            log_x = np.maximum(np.log(x), -100)
            log_1mx = np.maximum(np.log1p(-x), -100)
        loss = -(target * log_x + (1 - target) * log_1mx)
        if weight is not None:
            loss = loss * weight
        need = ctx.needs_input_grad
        if need[0] or need[1]:
            ctx.save_for_backward(x, target, weight)
        ctx._reduction = reduction
        ctx._meta = {"reduction": reduction}
        return _reduce(loss.astype(x.dtype, copy=False), reduction)

    @staticmethod
    def backward(ctx, grad):
        x, target, weight = ctx.saved_tensors
        g = _spread(grad, np.broadcast_shapes(x.shape, np.shape(target)), ctx._reduction)
        if weight is not None:
            g = g * weight
        gx = gt = None
        if ctx.needs_input_grad[0]:
            gx = g * (x - target) / np.maximum((1 - x) * x, 1e-12)
        if ctx.needs_input_grad[1]:
            with np.errstate(divide="ignore"):
                gt = g * (np.maximum(np.log1p(-x), -100) - np.maximum(np.log(x), -100))
        return gx, gt


def _class_layout(x, target):
    """Move the class axis last: input (N, C, d1…) -> (M, C), target (N, d1…) -> (M,)."""
    if x.ndim == 1:  # one sample: a class index (0-d) or a row of class probabilities
        return x[None, :], np.reshape(target, (1, -1) if np.ndim(target) == 1 else (1,))
    rows = np.moveaxis(x, 1, -1).reshape(-1, x.shape[1]) if x.ndim > 2 else x
    if np.ndim(target) == x.ndim:  # class probabilities, same layout as the input
        return rows, (np.moveaxis(target, 1, -1).reshape(-1, x.shape[1]) if x.ndim > 2 else target)
    return rows, np.reshape(target, -1)


def _class_grad_layout(g, x_shape):
    if len(x_shape) == 1:
        return g[0]
    if len(x_shape) > 2:
        moved = (x_shape[0],) + tuple(x_shape[2:]) + (x_shape[1],)
        return np.moveaxis(g.reshape(moved), -1, 1)
    return g


def check_class_target(x, target, name):
    """PyTorch's checks on a class-index target for nll_loss/cross_entropy."""
    if target.dtype.kind not in "iu":
        raise RuntimeError(f"expected target dtype to be Long or Byte, but got {_scalar_name(target.dtype).title()}")
    batch = 1 if x.ndim == 1 else x.shape[0]
    t_batch = 1 if target.ndim == 0 else target.shape[0]
    if x.ndim > 1 and batch != t_batch or x.ndim == 1 and target.ndim != 0:
        raise ValueError(f"Expected input batch_size ({batch}) to match target batch_size ({t_batch}).")
    if x.ndim > 2 and target.shape[1:] != x.shape[2:]:
        raise ShapeError(f"{name}: expected target size {list(x.shape[:1] + x.shape[2:])}, got "
                         f"{list(target.shape)}")


def _picked(t, ignore_index, classes, weight, dtype):
    """Safe class indices, and each row's weight (0 where ignored). The weights are None when every row
    counts once, the common case, which then costs two reductions instead of a handful of masks."""
    if t.size and weight is None:
        lo, hi = t.min(), t.max()
        if 0 <= lo and hi < classes and not lo <= ignore_index <= hi:
            return t, None
    valid = t != ignore_index
    bad = valid & ((t < 0) | (t >= classes))
    if bad.any():
        raise IndexError(f"Target {int(t[bad][0])} is out of bounds.")
    safe = np.where(valid, t, 0)
    w = valid.astype(dtype) if weight is None else np.where(valid, weight[safe], 0).astype(dtype)
    return safe, w


def _total(t, w, dtype):
    """The mean's denominator: the summed weights of the rows that count."""
    return dtype.type(len(t)) if w is None else w.sum()


class NllLoss(Function):
    _raw = True

    @staticmethod
    def forward(ctx, x, target, weight=None, ignore_index=-100, reduction="mean"):
        rows, t = _class_layout(x, target)
        safe, w = _picked(t, ignore_index, rows.shape[1], weight, x.dtype)
        losses = -rows[np.arange(len(t)), safe]
        if w is not None:
            losses *= w
        total = _total(t, w, x.dtype)
        ctx._nll = (x.shape, reduction, total)
        ctx._meta = {"reduction": reduction, "ignore_index": ignore_index}
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(safe, w)
        return _class_reduce(losses, total, np.shape(target), reduction)

    @staticmethod
    def backward(ctx, grad):
        safe, w = ctx.saved_tensors
        x_shape, reduction, total = ctx._nll
        classes = x_shape[0] if len(x_shape) == 1 else x_shape[1]
        g = np.zeros((len(safe), classes), dtype=grad.dtype)
        scale = _class_scale(grad, total, reduction)
        g[np.arange(len(safe)), safe] = -scale if w is None else -w * scale
        return _class_grad_layout(g, x_shape), None


def _class_reduce(losses, total, t_shape, reduction):
    dtype = losses.dtype
    if reduction == "mean":
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.asarray(losses.sum() / total, dtype=dtype)
    if reduction == "sum":
        return np.asarray(losses.sum(), dtype=dtype)
    return losses.reshape(t_shape)


def _class_scale(grad, total, reduction):
    if reduction == "mean":
        with np.errstate(invalid="ignore", divide="ignore"):
            return grad / total
    if reduction == "sum":
        return grad
    return grad.reshape(-1)


def _softmax_parts(rows):
    """Shifted logits, their exponentials and each row's sum: log_softmax = shifted - log(total)."""
    shifted = rows - rows.max(axis=1, keepdims=True)
    exp = np.exp(shifted)
    return shifted, exp, exp.sum(axis=1, keepdims=True)


class CrossEntropyLoss(Function):
    """log_softmax + nll_loss fused in one node that saves only the softmax (PyTorch records two nodes,
    ``LogSoftmaxBackward`` then ``NllLossBackward``). Targets are class indices or class probabilities."""

    _raw = True

    @staticmethod
    def forward(ctx, x, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
        rows, t = _class_layout(x, target)
        shifted, exp, total = _softmax_parts(rows)
        ctx._meta = {"reduction": reduction, "fused": "log_softmax + nll_loss"}
        if t.ndim == 2:  # class probabilities
            return CrossEntropyLoss._soft_forward(ctx, x, t, shifted - np.log(total), weight, reduction)
        safe, w = _picked(t, ignore_index, rows.shape[1], weight, x.dtype)
        if label_smoothing:
            ctx._meta.update(label_smoothing=label_smoothing, ignore_index=ignore_index)
            return _smoothed_forward(ctx, x, target, t, shifted - np.log(total), safe, w, weight,
                                     label_smoothing, reduction)
        losses = np.log(total[:, 0]) - shifted[np.arange(len(t)), safe]  # -log_softmax at each target
        if w is not None:
            losses *= w
        count = _total(t, w, x.dtype)
        ctx._ce = (x.shape, reduction, count, False)
        if ctx.needs_input_grad[0]:
            exp /= total  # the softmax, the only buffer backward needs
            ctx.save_for_backward(exp, safe, w)
        return _class_reduce(losses, count, np.shape(target), reduction)

    @staticmethod
    def _soft_forward(ctx, x, t, logp, weight, reduction):
        wt = t if weight is None else t * weight
        losses = -(logp * wt).sum(axis=1)
        count = len(logp)
        ctx._ce = (x.shape, reduction, count, True)
        if ctx.needs_input_grad[0] or ctx.needs_input_grad[1]:
            ctx.save_for_backward(logp, wt, weight)
        t_shape = x.shape[:1] + x.shape[2:] if x.ndim > 1 else ()
        return _class_reduce(losses, count, t_shape, reduction)

    @staticmethod
    def backward(ctx, grad):
        x_shape, reduction, total, soft = ctx._ce
        scale = _class_scale(grad, total, reduction)
        if soft == "smoothed":
            logp, q = ctx.saved_tensors
            scale = np.reshape(scale, (-1, 1)) if reduction == "none" else scale
            return _class_grad_layout((np.exp(logp) * q.sum(axis=1, keepdims=True) - q) * scale, x_shape), None
        if soft:
            logp, wt, weight = ctx.saved_tensors
            scale = np.reshape(scale, (-1, 1))
            gx = (np.exp(logp) * wt.sum(axis=1, keepdims=True) - wt) * scale
            gt = None
            if ctx.needs_input_grad[1]:
                gt = -logp * scale * (1 if weight is None else weight)
                gt = _class_grad_layout(gt, x_shape)
            return (_class_grad_layout(gx, x_shape) if ctx.needs_input_grad[0] else None), gt
        probs, safe, w = ctx.saved_tensors
        scale = np.reshape(scale, (-1, 1)) if reduction == "none" else scale
        if w is not None:
            scale = w[:, None] * scale
        g = probs * scale
        g[np.arange(len(safe)), safe] -= scale[:, 0] if np.ndim(scale) else scale
        return _class_grad_layout(g, x_shape), None


def _smoothed_forward(ctx, x, target, t, logp, safe, w, weight, eps, reduction):
    """Label smoothing: each row's target distribution ``q`` puts ``1 - eps`` on the class (times its weight)
    and spreads ``eps`` evenly over all classes (times theirs); ignored rows have none. The mean divides by the
    summed weights of the rows that count, as ``nll_loss`` does (PyTorch's rule)."""
    m, classes = logp.shape
    valid = (t != ctx._meta["ignore_index"]).astype(x.dtype)
    row_w = valid if w is None else w
    class_w = np.ones(classes, dtype=x.dtype) if weight is None else weight.astype(x.dtype, copy=False)
    q = (eps / classes) * valid[:, None] * class_w[None, :]
    q[np.arange(m), safe] += (1 - eps) * row_w
    losses = -(logp * q).sum(axis=1)
    count = _total(safe, w, x.dtype)
    ctx._ce = (x.shape, reduction, count, "smoothed")
    if ctx.needs_input_grad[0]:
        ctx.save_for_backward(logp, q)
    return _class_reduce(losses, count, np.shape(target), reduction)
