"""The engine: Variables, Functions, the backward pass, grad mode and the observer interface.

It depends on numpy alone; nothing here knows about tracing, rendering or the CLI.
"""

from .engine import backward, grad
from .function import Function
from .grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .gradcheck import GradcheckError, gradcheck
from .variable import Variable

Tensor = Variable

__all__ = ["Variable", "Tensor", "Function", "backward", "grad", "gradcheck", "GradcheckError", "no_grad",
           "enable_grad", "set_grad_enabled", "is_grad_enabled"]

# ----- breadth2: inference_mode (torch.autograd.inference_mode too) ----------------------------------------------
from .inference_mode import inference_mode  # noqa: E402

__all__ += ["inference_mode"]
