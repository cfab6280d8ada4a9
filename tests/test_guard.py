"""The trace guard (gradviz/tracing/adapters/guard.py) with the engine that calls it: while the traced thread is
alone the engine reaches the adapter's methods with no frame between (benchmarks/bench_guard.py), and either way
the adapter gets the arguments as given, its errors are recorded once and never reach the user's code, and a
stopped guard calls nothing."""

import importlib.util
import threading
import traceback
from pathlib import Path

import pytest

import gradviz
from gradviz.autograd.observer import Observer, observing
from gradviz.tracing.adapters.guard import CALLBACKS
from gradviz.tracing.frames import is_internal

_spec = importlib.util.spec_from_file_location(
    "guard_fakes", Path(__file__).resolve().parent.parent / "benchmarks" / "guard_fakes.py")
fakes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fakes)


def _op():
    """One op through the engine (it calls ``on_function``): its value shows the program went on."""
    x = gradviz.tensor([1.0, 2.0], requires_grad=True)
    return (x * 3.0).tolist()


def test_alone_the_engine_calls_the_adapters_own_methods_and_sharing_puts_the_lock_back():
    guard, adapter, _ = fakes.make_guard(solo=True)
    for name in CALLBACKS:
        assert getattr(guard, name) == getattr(adapter, name), name  # the bound method itself: no frame between
    guard.many_threads()  # a thread starts: every callback takes the lock from now on
    assert guard.solo is False and guard.active is True
    for name in CALLBACKS:
        callback = getattr(guard, name)
        assert callback.__name__ == name and callback.__code__.co_filename.endswith("adapters/guard.py"), name
        assert is_internal(callback.__code__), name  # the frame walk skips it


def test_arguments_reach_the_adapter_as_given_alone_and_under_the_lock():
    for solo in (True, False):
        guard, adapter, _ = fakes.make_guard(solo)
        guard.on_hook("v", "h", "call", grad=2)
        guard.on_hook("v", "h", "register")
        guard.on_hook("v", "h", "call", 3, result=4)
        assert adapter.seen == [("v", "h", "call", 2, None), ("v", "h", "register", None, None),
                                ("v", "h", "call", 3, 4)], solo


@pytest.mark.parametrize("solo", [True, False])
def test_an_adapter_error_inside_an_op_is_recorded_once_and_the_op_goes_on(solo):
    guard, _, builder = fakes.make_guard(solo, fail=True)
    with observing(guard):
        assert _op() == [3.0, 6.0]
    [(name, exc)] = builder.errors
    assert name == "on_function" and str(exc) == "adapter failed on <MulBackward>"
    frames = [(f.name, Path(f.filename).name) for f in traceback.extract_tb(exc.__traceback__)]
    if solo:  # caught where the engine called the adapter's method: nothing of the guard's in between
        assert frames == [("apply", "function.py"), ("on_function", "guard_fakes.py")]
    else:  # the shared callback took the lock and caught it
        assert frames == [("callback", "guard.py"), ("on_function", "guard_fakes.py")]


def test_a_stopped_guard_calls_nothing():
    guard, adapter, builder = fakes.make_guard(solo=True, fail=True)
    guard.many_threads()
    guard.stop()  # what detach does: stopped in every context it is still attached in
    assert all(getattr(guard, name) != getattr(adapter, name) for name in CALLBACKS)
    with observing(guard):
        assert _op() == [3.0, 6.0]
    guard.on_hook("v", "h", "call")
    assert builder.errors == [] and adapter.seen == []


def test_a_plain_observers_error_still_reaches_the_caller():
    class Failing(Observer):
        def on_function(self, node, inputs, outputs):
            raise RuntimeError("observer bug")

    with observing(Failing()), pytest.raises(RuntimeError, match="observer bug"):
        _op()


def test_under_the_lock_the_callback_switches_to_the_calling_threads_state():
    guard, adapter, builder = fakes.make_guard(solo=False)
    switched = []
    builder.switch_thread = lambda: switched.append("builder")
    adapter.switch_thread = lambda: switched.append("adapter")
    builder.thread_ident = adapter.thread_ident = -1  # another thread's state is loaded
    worker = threading.Thread(target=guard.on_hook, args=("v", "h", "call"))
    worker.start()
    worker.join()
    assert switched == ["builder", "adapter"] and adapter.seen == [("v", "h", "call", None, None)]
