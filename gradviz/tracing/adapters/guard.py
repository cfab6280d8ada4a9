"""``Guard``: what the engine actually calls when a trace watches gradviz's engine. It makes one adapter safe to
call from any thread, at any time, from inside the user's code.

Each observer callback of the guard
- returns at once unless the trace is active (``active``: a flag, so ``stop()`` from another thread stops every
  context the guard is attached in, not only the caller's);
- holds the builder's lock while the adapter turns the callback into facts (facts from several threads never
  interleave; the lock is re-entrant, see builder.py), and when the calling thread is not the one whose state
  is loaded, switches the builder's and the adapter's per-thread state (``switch_thread``: a thread's backward
  in progress, module calls…) — rare (at most once per thread switch), so the hot paths read plain attributes;
- never raises into the user's code: an exception inside the adapter is recorded in the document's
  ``internal_errors`` and the user's op goes on (KeyboardInterrupt and other BaseExceptions pass through).

That work is written once, here (``guarded``), and wraps every callback; the adapter's methods only turn a
callback into facts. While the traced code runs no other thread (``solo``: none when the trace started, none
started since — threads.py calls ``many_threads`` before a new thread runs, which turns it off for good), a
callback skips the lock and the thread checks and costs one frame more than the adapter's method: the engine
calls the guard's closure (stored on the instance: no bound method made per call), which calls the method with
the same parameters the Observer method names (each callback is made from one template, see ``_TEMPLATE``).
"""

import inspect
import sys
from threading import get_ident

from ...autograd.observer import Observer

CALLBACKS = tuple(name for name in vars(Observer) if name.startswith("on_"))


class Guard(Observer):
    """Forwards every ``Observer`` callback to ``adapter`` (an ``Observer`` with ``thread_ident`` and
    ``switch_thread()``, like the builder's) under ``builder.lock``, while ``active``."""

    def __init__(self, adapter, builder):
        self.adapter = adapter
        self.builder = builder
        self.active = False
        self.solo = False  # active, and no other thread has existed since the trace started (see the docstring)
        for name in CALLBACKS:
            setattr(self, name, guarded(self, name, getattr(adapter, name)))

    def many_threads(self):
        """A thread is starting while the trace is active (threads.py): from now on every callback takes the
        lock (and so does an adapter that skips it while its thread is alone, told by its ``many_threads()``)."""
        self.solo = False
        hook = getattr(self.adapter, "many_threads", None)
        if hook is not None:
            hook()

    def missed(self, thread):
        """``thread`` was started by code the trace does not observe (threads.py): the document lists it."""
        self.builder.note_thread(thread)

    def __repr__(self):
        return f"<gradviz trace guard {'active' if self.active else 'stopped'} for {type(self.adapter).__name__}>"


def guarded(guard, name, target):
    """Callback ``name`` of ``guard``: ``target`` (the adapter's method) with the guard's work around it."""
    return _MAKERS[name](guard, target, name, _DEFAULTS[name])


# The callback's text, made once per Observer method with that method's own parameters: a callback taking
# ``*args, **kwargs`` cost ~170 ns more a call than the adapter's method alone (a dict made per call, and a call
# the interpreter cannot inline); with the method's own parameters, ~50 ns (benchmarks/bench_guard.py, CPython
# 3.11). Compiled once at import as this file's lines below (padded to them): the frames read as gradviz's own
# and tracebacks show these lines; each trace start only calls ``make``.
_TEMPLATE_LINE = sys._getframe().f_lineno + 2
_TEMPLATE = """\
def make(guard, target, name, defaults):
    builder = guard.builder
    adapter = guard.adapter
    acquire = builder.lock.acquire
    release = builder.lock.release
    failed = builder.internal_error

    def {name}({params}):
        if guard.solo:  # the usual case: active, one thread, nothing to lock or switch
            try:
                target({args})
            except Exception as exc:
                failed(name, exc)
            return
        if guard.active:
            acquire()
            try:
                if guard.active:  # again, under the lock: a stop() may have come in between
                    me = get_ident()
                    if builder.thread_ident != me:
                        builder.switch_thread()
                    if adapter.thread_ident != me:
                        adapter.switch_thread()
                    target({args})
            except Exception as exc:
                failed(name, exc)
            finally:
                release()

    return {name}
"""


def _source(name):
    """The callback maker's text for Observer method ``name``, and its parameters' defaults."""
    params = list(inspect.signature(getattr(Observer, name)).parameters.values())[1:]  # (not self)
    clash = {p.name for p in params} & {"guard", "target", "builder", "adapter", "acquire", "release", "failed",
                                         "get_ident", "name", "defaults", "exc", "me", "make"}
    assert not clash, f"Observer.{name}'s parameters {sorted(clash)} would hide the callback's own names"
    defaults = {p.name: p.default for p in params if p.default is not p.empty}
    heads = [f"{p.name}=defaults[{p.name!r}]" if p.name in defaults else p.name for p in params]
    args = [f"{p.name}={p.name}" if p.name in defaults else p.name for p in params]
    return _TEMPLATE.format(name=name, params=", ".join(heads), args=", ".join(args)), defaults


def _maker(text):
    scope = {"get_ident": get_ident}
    exec(compile("\n" * (_TEMPLATE_LINE - 1) + text, __file__, "exec"), scope)  # noqa: S102 (our template)
    return scope["make"]


_MAKERS = {}
_DEFAULTS = {}
for _name in CALLBACKS:
    _text, _DEFAULTS[_name] = _source(_name)
    _MAKERS[_name] = _maker(_text)
