"""The stand-ins the trace guard's benchmark (bench_guard.py) and its tests (tests/test_guard.py) share: the
builder's part the guard touches and an adapter whose callbacks do (almost) nothing, so what is measured or
checked is the guard's own work."""

import threading

from gradviz.autograd.observer import Observer
from gradviz.tracing.adapters.guard import Guard


class FakeBuilder:
    """The builder's part the guard touches: its lock, whose thread state is loaded, the internal errors."""

    def __init__(self):
        self.lock = threading.RLock()
        self.thread_ident = threading.get_ident()
        self.errors = []

    def internal_error(self, name, exc):
        self.errors.append((name, exc))


class FakeAdapter(Observer):
    """Records its hook callbacks; ``on_function`` does nothing, or raises when made with ``fail=True``."""

    thread_ident = threading.get_ident()

    def __init__(self, fail=False):
        self.fail = fail
        self.seen = []

    def on_hook(self, variable, hook, event, grad=None, result=None):
        self.seen.append((variable, hook, event, grad, result))

    def on_function(self, node, inputs, outputs):
        if self.fail:
            raise ValueError(f"adapter failed on {node}")


def make_guard(solo, fail=False):
    """An active guard over a ``FakeAdapter`` and a ``FakeBuilder``, alone on its thread (``solo``) or not."""
    adapter, builder = FakeAdapter(fail), FakeBuilder()
    guard = Guard(adapter, builder)
    guard.start(solo)
    return guard, adapter, builder
