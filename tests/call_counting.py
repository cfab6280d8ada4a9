"""Counting what a test's code path calls: a module function's calls, the trace builder's lock, and the line a
test file's own text is on."""

import sys


def counting(monkeypatch, module, name):
    """``module.name`` replaced (for the test) by a pass-through that records each call's ``(args, kwargs)``."""
    calls, original = [], getattr(module, name)

    def counted(*args, **kwargs):
        calls.append((args, kwargs))
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def counting_lock(builder):
    """The names of the functions that take ``builder``'s lock from now on, in order."""
    taken = []
    acquire = builder.acquire

    def counted():
        taken.append(sys._getframe(1).f_code.co_name)
        acquire()

    builder.acquire = counted
    return taken


def line_of(path, text):
    """The number of the first line of the file ``path`` holding ``text`` (and not a ``line_of`` call)."""
    with open(path) as f:
        return next(i for i, line in enumerate(f, 1) if text in line and "line_of" not in line)
