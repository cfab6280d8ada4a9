"""Where in the user's code a PyTorch call happened: the first frame outside gradviz and outside torch.

An op inside ``nn.Linear.forward`` (torch's own code) is placed at the line that called the module, as gradviz's
engine places ops inside its own modules; an op inside a user-defined ``forward`` at that forward's line.
Whether a code object is internal is decided once per code object.
"""

import os
import sys

from ..frames import _LIBRARY_DIRS

_GRADVIZ_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep
# keyed by id(code), holding the code object (``_held``) so the id is not reused: code objects compare equal across
# files, so keying on the object would mix up identical code in two files (see frames.py)
_internal = {}  # id(code) -> True when it belongs to gradviz, torch, the standard library or an installed package
_ours = {}  # id(code) -> True when it belongs to gradviz
_held = {}
_internal_dirs = (_GRADVIZ_DIR,) + _LIBRARY_DIRS


def set_torch_dir(torch_dir):
    """Called once torch is imported: its package folder counts as internal from then on."""
    global _internal_dirs
    torch_dir = os.path.abspath(torch_dir) + os.sep
    if torch_dir not in _internal_dirs:
        _internal_dirs = _internal_dirs + (torch_dir,)
        _internal.clear()


def is_internal(code):
    flag = _internal.get(id(code))
    if flag is None:
        filename = code.co_filename
        flag = filename[:1] != "<" and os.path.abspath(filename).startswith(_internal_dirs)
        if filename.startswith("<eval_with_key>") or filename.startswith("<frozen "):
            flag = True  # torch.fx generated code and the import machinery are not the user's
        _held[id(code)] = code
        _internal[id(code)] = flag
    return flag


def user_frame(depth):
    """The innermost frame outside gradviz and torch, starting ``depth`` frames above the caller."""
    try:
        f = sys._getframe(depth + 1)
    except ValueError:
        return None
    internal = _internal
    while f is not None:
        code = f.f_code
        flag = internal.get(id(code))
        if flag is None:
            flag = is_internal(code)
        if not flag:
            return f
        f = f.f_back
    return None


def where():
    """``(user frame, call site)`` of a call into PyTorch, in one walk outwards from the caller. The site tells
    two calls on one user line apart: the user frame's instruction and, when torch's own Python code made the
    call (an op inside ``nn.MultiheadAttention.forward``, where every op shares the user's line), the innermost
    torch frame's code and instruction and how deep it is."""
    f = sys._getframe(1)
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
    own = getattr(func, "__code__", None)
    f = sys._getframe(1)
    while f is not None:
        code = f.f_code
        if not (code is own or code.co_filename.startswith(_GRADVIZ_DIR) or code.co_name == "handle_torch_function"):
            break
        f = f.f_back
    return f is not None and is_internal(f.f_code)
