"""Where in the user's code a PyTorch call happened: the first frame outside gradviz and outside torch.

An op inside ``nn.Linear.forward`` (torch's own code) is placed at the line that called the module, as gradviz's
engine places ops inside its own modules; an op inside a user-defined ``forward`` at that forward's line.
What is internal, and the walk to the user's frame, are tracing/frames.py's (one rule, one cache for both
engines); here are what only PyTorch needs: torch's folder added to it, and ``where``, which also tells two calls
on one user line apart.
"""

import sys

from ...frames import _PACKAGE_DIR as _GRADVIZ_DIR
from ...frames import _held, _internal, add_internal_dir, is_internal
from ...frames import user_frame as _user_frame

__all__ = ["caller_is_internal", "is_internal", "set_torch_dir", "user_caller", "user_frame", "where"]

_ours = {}  # id(code) -> True when it belongs to gradviz (the code objects are held by frames._held)


def set_torch_dir(torch_dir):
    """Called once torch is imported: its package folder counts as internal from then on."""
    add_internal_dir(torch_dir)


def user_frame(depth):
    """The innermost frame outside gradviz and torch, starting ``depth`` frames above the caller (frames.py's
    walk, counted as the torch adapter counts: 0 is the caller's frame)."""
    return _user_frame(depth + 2)


def where(ours=0):
    """``(user frame, call site)`` of a call into PyTorch, in one walk outwards from the caller. The site tells
    two calls on one user line apart: the user frame's instruction and, when torch's own Python code made the
    call (an op inside ``nn.MultiheadAttention.forward``, where every op shares the user's line), the innermost
    torch frame's code and instruction and how deep it is. ``ours``: how many frames, the caller's first, are
    gradviz's for certain (the adapter's own call chain), stepped over without looking at them."""
    f = sys._getframe(1 + ours)
    internal = _internal
    ours = _ours
    while f is not None:
        code = f.f_code
        flag = ours.get(id(code))
        if flag is None:
            _held[id(code)] = code
            flag = ours[id(code)] = code.co_filename.startswith(_GRADVIZ_DIR)
        if not flag:
            break
        f = f.f_back
    inner = f
    depth = 0
    while f is not None:
        code = f.f_code
        flag = internal.get(id(code))
        if flag is None:
            flag = is_internal(code)
        if not flag:
            if f is inner:
                return f, f.f_lasti
            return f, (f.f_lasti, id(inner.f_code), inner.f_lasti, depth)
        f = f.f_back
        depth += 1
    return None, -1


def caller_is_internal(func=None):
    """Whether the code that called ``func`` (the first frame outside gradviz, and outside ``func`` itself when it
    is a Python method such as ``Tensor.register_hook``, looking outwards from here) is torch's own (an optimizer
    reading ``p.grad``, ``zero_grad`` writing it): such reads and writes are not the user's."""
    f = _caller(func)
    if f is None:
        return False
    return is_internal(f.f_code)


def user_caller(func=None):
    """``caller_is_internal`` and ``user_frame(0)`` of the same caller in one walk: ``(True, None)`` when the code
    that called ``func`` is torch's own, else ``(False, the user's frame or None)``. Every frame the walk steps over
    (gradviz's, ``func``'s, torch's ``handle_torch_function``) is internal, so a caller that is not is the frame
    ``user_frame`` would find."""
    f = _caller(func)
    if f is None:
        return False, None
    return (True, None) if is_internal(f.f_code) else (False, f)


def _caller(func):
    """The first frame, from the caller's caller outwards, that is not gradviz's, ``func``'s or torch's
    ``handle_torch_function``; None when there is none."""
    own = getattr(func, "__code__", None)
    f = sys._getframe(2)
    while f is not None:
        code = f.f_code
        if not (code is own or code.co_filename.startswith(_GRADVIZ_DIR) or code.co_name == "handle_torch_function"):
            break
        f = f.f_back
    return f
