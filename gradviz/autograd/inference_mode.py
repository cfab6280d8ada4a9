"""``inference_mode``: PyTorch's faster ``no_grad`` for code that will never need gradients.

gradviz has no inference-tensor machinery to speed up, so inside it ops record no graph exactly as under
``no_grad``; tensors made inside are not flagged as inference tensors (``Tensor.is_inference`` is not provided).
``inference_mode(False)`` leaves grad mode as it is, as in PyTorch. Works as a context manager and as a
decorator, with or without parentheses.
"""

import contextvars
import functools

from .grad_mode import _grad_enabled

_inference_enabled = contextvars.ContextVar("gradviz_inference_mode", default=False)


class inference_mode:  # noqa: N801 - PyTorch's name
    def __new__(cls, mode=True):
        if callable(mode) and not isinstance(mode, bool):
            return cls()(mode)  # bare @inference_mode
        return super().__new__(cls)

    def __init__(self, mode=True):
        self.mode = bool(mode)
        self._tokens = []

    def __enter__(self):
        self._tokens.append((_grad_enabled.set(False), _inference_enabled.set(True)) if self.mode else None)
        return self

    def __exit__(self, *exc):
        tokens = self._tokens.pop()
        if tokens is not None:
            _grad_enabled.reset(tokens[0])
            _inference_enabled.reset(tokens[1])
        return False

    def __call__(self, fn):
        mode = self.mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with inference_mode(mode):
                return fn(*args, **kwargs)

        return wrapper

    def clone(self):
        return inference_mode(self.mode)


def is_inference_mode_enabled():
    """Whether an enabled ``inference_mode`` block is running."""
    return _inference_enabled.get()
