"""Where Graphviz's ``dot`` program is: ``shutil.which`` once per PATH.

A run's drawing asks about ten times (whether dot is there, to start it, for its plugin folder), and each
``which`` looks in every PATH folder (85 µs on this machine, about 1 ms of a transformer's drawing). The answer is
kept per PATH value and checked with one ``access`` call when read again; a missing ``dot`` is not kept, so one
installed while a notebook runs is found on the next call.
"""

import os
import shutil

_FOUND = {}  # PATH value -> the dot program found on it


def dot_program():
    """The path of the ``dot`` program on PATH, or None."""
    path = os.environ.get("PATH")
    exe = _FOUND.get(path)
    if exe is not None and os.access(exe, os.X_OK):
        return exe
    exe = shutil.which("dot")
    if exe is None:
        _FOUND.pop(path, None)
    else:
        _FOUND[path] = exe
    return exe
