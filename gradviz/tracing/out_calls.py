"""Which functions the user's code calls with ``out=``: the only ones a light iteration wraps to see those writes.

An ``out=`` write changes a tensor in place (a value saved for backward among them) through an ordinary function
(``torch.mul(a, b, out=h)``). Wrapping every function to look for the keyword would tax every op of a light
iteration; a script names the few it calls that way, so its files are read once (``ast``) and only those names are
wrapped.
"""

import ast
import linecache
import os
import sys

from .frames import _LIBRARY_DIRS, _PACKAGE_DIR

FILE_LIMIT = 200  # user files read, at most
_by_file = {}  # filename -> frozenset of the names called with out= in it
_classified = {}  # module name -> (its module object, its file when it is the user's, else None)


def names_called_with_out(filenames):
    """The function names (``mul`` for ``torch.mul(..., out=h)``) called with an ``out=`` keyword in ``filenames``."""
    found = set()
    for filename in filenames:
        names = _by_file.get(filename)
        if names is None:
            names = _by_file[filename] = _scan(filename)
        found |= names
    return found


def user_files():
    """The user's source files loaded now: the script being run and its own modules (not gradviz's, nor the
    standard library's or installed packages')."""
    files = []
    classified = _classified
    for name, module in list(sys.modules.items()):
        known = classified.get(name)
        if known is None or known[0] is not module:  # (each module is looked at once, at the first switch)
            filename = getattr(module, "__file__", None)
            mine = None
            if filename and filename.endswith(".py"):
                path = os.path.abspath(filename)
                if not (path.startswith(_PACKAGE_DIR) or path.startswith(_LIBRARY_DIRS)):
                    mine = filename
            known = classified[name] = (module, mine)
        if known[1] is not None and len(files) < FILE_LIMIT:
            files.append(known[1])
    return files


def user_modules():
    """``[(name, module)]`` of the modules ``user_files`` last found to be the user's."""
    return [(name, known[0]) for name, known in list(_classified.items()) if known[1] is not None]


def _scan(filename):
    source = "".join(linecache.getlines(filename))
    if "out" not in source:
        return frozenset()
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return frozenset()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and any(k.arg == "out" for k in node.keywords):
            func = node.func
            if isinstance(func, ast.Attribute):
                names.add(func.attr)
            elif isinstance(func, ast.Name):
                names.add(func.id)
    return frozenset(names)
