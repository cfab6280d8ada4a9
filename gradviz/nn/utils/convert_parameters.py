"""All parameters as one flat vector, and back."""

from ...autograd.grad_mode import no_grad
from ...autograd.variable import Variable
from ...ops import shape as _S


def _typename(value):
    if isinstance(value, Variable):
        return "torch.Tensor"
    return f"{type(value).__module__}.{type(value).__qualname__}" if type(value).__module__ != "builtins" \
        else type(value).__qualname__


def parameters_to_vector(parameters):
    """One 1-d tensor of every parameter, flattened and concatenated; differentiable, like PyTorch's."""
    return _S.cat([p.reshape(-1) for p in parameters], 0)


def vector_to_parameters(vec, parameters):
    """Copy slices of ``vec`` into the parameters' data, in order (outside the graph)."""
    if not isinstance(vec, Variable):
        raise TypeError(f"expected torch.Tensor, but got: {_typename(vec)}")
    pointer = 0
    with no_grad():
        for param in parameters:
            n = param.numel()
            param.data = vec[pointer:pointer + n].view_as(param).data
            pointer += n
