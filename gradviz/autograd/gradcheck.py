"""``gradcheck``: compare backward's gradients with central differences, in float64."""

import numpy as np

from .engine import grad as _grad
from .grad_mode import no_grad
from .observer import quiet
from .variable import Variable


class GradcheckError(RuntimeError):
    """Analytical and numerical gradients disagree; the message names the input and the worst element."""


def gradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True):
    """Check ``fn``'s gradients for every input that requires grad. Inputs should be float64.

    Every output element is differentiated separately (one backward per element), so the full Jacobian is
    compared, not just a sum of it."""
    with quiet():  # its backward calls and .numpy() reads are gradviz's own, not the user's
        return _gradcheck(fn, inputs, eps, atol, rtol, raise_exception)


def _gradcheck(fn, inputs, eps, atol, rtol, raise_exception):
    inputs = (inputs,) if isinstance(inputs, Variable) else tuple(inputs)
    wrt = [i for i, x in enumerate(inputs) if isinstance(x, Variable) and x.requires_grad]
    for i in wrt:
        if inputs[i].dtype != np.float64:
            raise GradcheckError(f"gradcheck: input {i} is {inputs[i].dtype}; use float64 inputs "
                                 "(finite differences in float32 are too coarse)")
    outputs = _as_tuple(fn(*inputs))
    for k, out in enumerate(outputs):
        if not out.requires_grad:
            continue
        analytical = _analytical(out, [inputs[i] for i in wrt])
        numerical = _numerical(fn, inputs, wrt, k, eps)
        for col, i in enumerate(wrt):
            a, n = analytical[col], numerical[col]
            if not np.allclose(a, n, atol=atol, rtol=rtol, equal_nan=False):
                if not raise_exception:
                    return False
                worst = np.unravel_index(np.argmax(np.abs(a - n)), a.shape)
                raise GradcheckError(
                    f"Jacobian mismatch for output {k} with respect to input {i}: at (output, input) element "
                    f"{tuple(int(w) for w in worst)} backward gives {a[worst]:.8g}, central differences give "
                    f"{n[worst]:.8g}")
    return True


def _as_tuple(out):
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def _analytical(out, wrt):
    """Jacobian rows by backward: one autograd.grad call per output element."""
    n_out = out.numel()
    jac = [np.zeros((n_out,) + tuple(x.shape)) for x in wrt]
    for j in range(n_out):
        seed = np.zeros(out.numel(), dtype=out.dtype)
        seed[j] = 1
        grads = _grad(out, wrt, grad_outputs=Variable(seed.reshape(out.shape)), retain_graph=True,
                      allow_unused=True)
        for col, g in enumerate(grads):
            if g is not None:
                jac[col][j] = g.numpy()
    return jac


def _numerical(fn, inputs, wrt, k, eps):
    jac = []
    with no_grad():
        for i in wrt:
            x = inputs[i]
            if not x._data.flags.c_contiguous:
                x._data = np.ascontiguousarray(x._data)
            flat = x._data.reshape(-1)  # a view: perturb in place, restore after
            n_out = _as_tuple(fn(*inputs))[k].numel()
            cols = np.zeros((n_out, flat.size))
            for e in range(flat.size):
                orig = flat[e]
                flat[e] = orig + eps
                plus = np.array(_as_tuple(fn(*inputs))[k]._data, dtype=np.float64).reshape(-1)
                flat[e] = orig - eps
                minus = np.array(_as_tuple(fn(*inputs))[k]._data, dtype=np.float64).reshape(-1)
                flat[e] = orig
                cols[:, e] = (plus - minus) / (2 * eps)
            jac.append(cols.reshape((n_out,) + tuple(x.shape)))
    return jac
