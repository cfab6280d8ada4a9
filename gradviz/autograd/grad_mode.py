"""Grad mode: whether ops record a graph. Kept in a context variable so threads and tasks do not share it."""

import contextvars
import functools

_grad_enabled = contextvars.ContextVar("gradviz_grad_enabled", default=True)


def is_grad_enabled():
    return _grad_enabled.get()


class _GradModeContext:
    """Base of no_grad/enable_grad/set_grad_enabled: a context manager that also decorates functions."""

    _mode = True

    def __enter__(self):
        self._token = _grad_enabled.set(self._mode)
        return self

    def __exit__(self, *exc):
        _grad_enabled.reset(self._token)
        return False

    def __call__(self, fn):
        mode = self._mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            token = _grad_enabled.set(mode)
            try:
                return fn(*args, **kwargs)
            finally:
                _grad_enabled.reset(token)

        return wrapper


class no_grad(_GradModeContext):
    """Ops inside record no graph; their outputs do not require grad."""

    _mode = False


class enable_grad(_GradModeContext):
    """Turn recording back on inside a ``no_grad`` block."""

    _mode = True


class set_grad_enabled(_GradModeContext):
    """``set_grad_enabled(False)`` is ``no_grad()``. Like PyTorch, calling it also sets the mode at once."""

    def __init__(self, mode):
        self._mode = bool(mode)
        self._prev = _grad_enabled.get()
        self._immediate = _grad_enabled.set(self._mode)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _grad_enabled.set(self._prev)
        return False

    def __call__(self, fn):
        # Used as a decorator: undo the immediate switch, apply the mode only inside ``fn``.
        _grad_enabled.set(self._prev)
        return super().__call__(fn)
