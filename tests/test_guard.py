"""The trace guard's callbacks (gradviz/tracing/adapters/guard.py): each takes its Observer method's own
parameters (no ``*args, **kwargs`` forwarding, ~120 ns a callback: benchmarks/bench_guard.py), hands them to the
adapter as given, keeps the adapter's errors out of the user's code, and its frames read as gradviz's."""

import inspect
import threading
import traceback

from gradviz.autograd.observer import Observer
from gradviz.tracing.adapters.guard import CALLBACKS, Guard
from gradviz.tracing.frames import is_internal


class _Builder:
    def __init__(self):
        self.lock = threading.RLock()
        self.thread_ident = threading.get_ident()
        self.errors = []

    def internal_error(self, name, exc):
        self.errors.append((name, exc))


class _Adapter(Observer):
    thread_ident = threading.get_ident()

    def __init__(self):
        self.seen = []

    def on_hook(self, variable, hook, event, grad=None, result=None):
        self.seen.append((variable, hook, event, grad, result))

    def on_function(self, node, inputs, outputs):
        raise ValueError(f"adapter failed on {node}")


def _guard(solo):
    adapter, builder = _Adapter(), _Builder()
    guard = Guard(adapter, builder)
    guard.active, guard.solo = True, solo
    return guard, adapter, builder


def test_each_callback_takes_its_observer_methods_own_parameters():
    guard, _, _ = _guard(True)
    for name in CALLBACKS:
        expected = list(inspect.signature(getattr(Observer, name)).parameters.values())[1:]
        assert list(inspect.signature(getattr(guard, name)).parameters.values()) == expected, name


def test_arguments_reach_the_adapter_as_given_alone_and_under_the_lock():
    for solo in (True, False):
        guard, adapter, _ = _guard(solo)
        guard.on_hook("v", "h", "call", grad=2)
        guard.on_hook("v", "h", "register")
        guard.on_hook("v", "h", "call", 3, result=4)
        assert adapter.seen == [("v", "h", "call", 2, None), ("v", "h", "register", None, None),
                                ("v", "h", "call", 3, 4)], solo


def test_an_adapter_error_is_recorded_not_raised_and_a_stopped_guard_calls_nothing():
    guard, adapter, builder = _guard(True)
    assert guard.on_function("node 1", (), ()) is None
    guard.solo = False
    guard.on_function("node 2", (), ())
    guard.active = False
    guard.on_function("node 3", (), ())
    guard.on_hook("v", "h", "call")
    assert [(name, str(exc)) for name, exc in builder.errors] == [("on_function", "adapter failed on node 1"),
                                                                  ("on_function", "adapter failed on node 2")]
    assert adapter.seen == []


def test_the_callbacks_frames_are_gradvizs_and_show_the_guards_own_lines():
    guard, _, builder = _guard(True)
    guard.on_function("node", (), ())
    [(_, exc)] = builder.errors
    frames = traceback.extract_tb(exc.__traceback__)
    assert [f.name for f in frames] == ["on_function", "on_function"]  # the guard's callback, then the adapter's
    callback = frames[0]
    assert callback.filename.endswith("gradviz/tracing/adapters/guard.py")
    assert callback.line == "target({args})"  # the template's line in guard.py, not an unreadable <string>
    assert is_internal(guard.on_function.__code__)
