"""``torch.autograd.functional``'s ``jacobian`` and ``vjp``, first order only, by the engine's reverse mode.

Inputs are detached copies that require grad, so ``func`` builds a graph of its own; ``jacobian`` runs one
backward per output element (``retain_graph``), ``vjp`` one backward. An input an output does not depend on gets
zeros, as PyTorch's ``strict=False``. ``create_graph=True`` (differentiating the result again), ``strict=True``
and the vectorized / forward-mode strategies are not implemented: each raises ``UnsupportedError`` in one line.
"""

import numpy as np

from ..errors import UnsupportedError
from .engine import grad as _grad
from .grad_mode import enable_grad
from .variable import Variable


def _as_tuple(value, arg_name, fn_name):
    if isinstance(value, Variable):
        return False, (value,)
    if isinstance(value, tuple) and all(isinstance(v, Variable) for v in value):
        return True, value
    if arg_name == "outputs":
        raise TypeError(f"The outputs of the user-provided function given to {fn_name} must be either a Tensor or "
                        f"a tuple of Tensors but the given outputs of the user-provided function has type "
                        f"{type(value)}.")
    raise TypeError(f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of Tensors but the given "
                    f"{arg_name} has type {type(value)}.")


def _refuse(fn_name, create_graph, strict, **others):
    if create_graph:
        raise UnsupportedError(f"gradviz's {fn_name} does not support higher-order gradients (create_graph=True)",
                               torch_name="create_graph=True")
    if strict:
        raise UnsupportedError(f"gradviz's {fn_name} does not implement strict=True", torch_name="strict=True")
    for name, (value, default) in others.items():
        if value != default:
            raise UnsupportedError(f"gradviz's {fn_name} does not implement {name}={value!r}",
                                   torch_name=f"{name}={value!r}")


def _run(func, inputs, fn_name):
    is_tuple, inputs = _as_tuple(inputs, "inputs", fn_name)
    inputs = tuple(x.detach().requires_grad_(x._data.dtype.kind in "fc") for x in inputs)
    with enable_grad():
        outputs = func(*inputs)
    outputs_tuple, outputs = _as_tuple(outputs, "outputs", fn_name)
    return is_tuple, inputs, outputs_tuple, outputs


def _grads(output, inputs, grad_output):
    """d(output · grad_output)/d(each input), zeros where the output does not depend on an input."""
    if not output.requires_grad:
        return [np.zeros_like(x._data) for x in inputs]
    found = _grad([output], list(inputs), grad_outputs=[grad_output], retain_graph=True, allow_unused=True)
    return [np.zeros_like(x._data) if g is None else g._data for g, x in zip(found, inputs)]


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(*inputs), v^T J)``: outputs detached, one vector-Jacobian product per input."""
    _refuse("vjp", create_graph, strict)
    is_tuple, inputs, outputs_tuple, outputs = _run(func, inputs, "vjp")
    if v is None:
        if len(outputs) != 1 or outputs[0].numel() != 1:
            raise RuntimeError("The vector v can only be None if the user-provided function returns a single "
                               "Tensor with a single element.")
        vs = (Variable(np.ones_like(outputs[0]._data)),)
    else:
        _, vs = _as_tuple(v, "v", "vjp")
        if len(vs) != len(outputs):
            raise RuntimeError(f"v is a tuple of invalid length: should be {len(outputs)} but got {len(vs)}.")
        for out, vec in zip(outputs, vs):
            if tuple(out.shape) != tuple(vec.shape):
                raise RuntimeError(f"v has invalid size: should be {out.shape} but got {vec.shape}.")
    totals = [np.zeros_like(x._data) for x in inputs]
    for out, vec in zip(outputs, vs):
        for total, g in zip(totals, _grads(out, inputs, vec.detach())):
            total += g
    result = tuple(Variable(t) for t in totals)
    detached = tuple(o.detach() for o in outputs)
    return (detached if outputs_tuple else detached[0]), (result if is_tuple else result[0])


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False, strategy="reverse-mode"):
    """d func(*inputs) / d inputs: for each output and input a tensor of shape ``output.shape + input.shape``,
    nested as PyTorch nests them (a tensor when both are single tensors)."""
    _refuse("jacobian", create_graph, strict, vectorize=(vectorize, False), strategy=(strategy, "reverse-mode"))
    is_tuple, inputs, outputs_tuple, outputs = _run(func, inputs, "jacobian")
    per_output = []
    for out in outputs:
        rows = [np.zeros(tuple(out.shape) + tuple(x.shape), dtype=x._data.dtype) for x in inputs]
        flat_rows = [r.reshape(out.numel(), *x.shape) for r, x in zip(rows, inputs)]
        for k in range(out.numel()):
            basis = np.zeros(out.numel(), dtype=out._data.dtype)
            basis[k] = 1
            for flat, g in zip(flat_rows, _grads(out, inputs, Variable(basis.reshape(out.shape)))):
                flat[k] = g
        jac = tuple(Variable(r) for r in rows)
        per_output.append(jac if is_tuple else jac[0])
    return tuple(per_output) if outputs_tuple else per_output[0]


__all__ = ["jacobian", "vjp"]
