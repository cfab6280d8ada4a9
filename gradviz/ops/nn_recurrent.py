"""The pointwise part of one LSTM or GRU step as a single node: the recurrent layers' matmuls stay ordinary
linear nodes, and the gates' sigmoids, tanhs and products (a dozen small ops, and four full-size gradient
buffers for the gate slices) become one forward and one backward."""

import numpy as np

from ..autograd.function import Function


def _sigmoid(x):
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x))


class LstmCell(Function):
    """``gates`` (N, 4H) in PyTorch's order (input, forget, cell, output) and the previous cell state ``c``
    (None: zeros) -> ``(h, c')`` with ``c' = f c + i g`` and ``h = o tanh(c')``."""

    _raw = True

    @staticmethod
    def forward(ctx, gates, c=None):
        n = gates.shape[-1] // 4
        i = _sigmoid(gates[..., 0:n])
        f = _sigmoid(gates[..., n:2 * n])
        g = np.tanh(gates[..., 2 * n:3 * n])
        o = _sigmoid(gates[..., 3 * n:])
        c_new = i * g if c is None else f * c + i * g
        tanh_c = np.tanh(c_new)
        if any(ctx.needs_input_grad):
            ctx.save_for_backward(i, f, g, o, tanh_c, c)
        return o * tanh_c, c_new

    @staticmethod
    def backward(ctx, grad_h, grad_c):
        i, f, g, o, tanh_c, c = ctx.saved_tensors
        through_c = grad_c + grad_h * o * (1 - tanh_c * tanh_c)
        d_f = np.zeros_like(f) if c is None else through_c * c * f * (1 - f)
        d_gates = np.concatenate([through_c * g * i * (1 - i), d_f, through_c * i * (1 - g * g),
                                  grad_h * tanh_c * o * (1 - o)], axis=-1)
        return d_gates, (through_c * f if c is not None and ctx.needs_input_grad[1] else None)


class GruCell(Function):
    """The GRU update from the input projection ``xp`` (N, 3H), the recurrent projection ``gh`` (N, 3H; None:
    a zero state without bias) and the previous state ``h`` (None: zeros), gates in PyTorch's order (reset,
    update, new): ``n = tanh(x_n + r gh_n)``, ``h' = n + z (h - n)``."""

    _raw = True

    @staticmethod
    def forward(ctx, xp, gh=None, h=None):
        k = xp.shape[-1] // 3
        if gh is None:
            r = np.zeros_like(xp[..., 0:k])
            z = _sigmoid(xp[..., k:2 * k])
            new = np.tanh(xp[..., 2 * k:])
        else:
            r = _sigmoid(xp[..., 0:k] + gh[..., 0:k])
            z = _sigmoid(xp[..., k:2 * k] + gh[..., k:2 * k])
            new = np.tanh(xp[..., 2 * k:] + r * gh[..., 2 * k:])
        out = new - z * new if h is None else new + z * (h - new)
        if any(ctx.needs_input_grad):
            ctx.save_for_backward(r, z, new, None if gh is None else gh[..., 2 * k:], h)
        return out

    @staticmethod
    def backward(ctx, grad):
        r, z, new, gh_n, h = ctx.saved_tensors
        d_new = grad * (1 - z) * (1 - new * new)  # through tanh
        d_z = grad * ((0 if h is None else h) - new) * z * (1 - z)
        d_r = np.zeros_like(r) if gh_n is None else d_new * gh_n * r * (1 - r)
        d_xp = np.concatenate([d_r, d_z, d_new], axis=-1)
        need = ctx.needs_input_grad
        d_gh = None
        if gh_n is not None and need[1]:
            d_gh = np.concatenate([d_r, d_z, d_new * r], axis=-1)
        d_h = grad * z if h is not None and need[2] else None
        return d_xp, d_gh, d_h
