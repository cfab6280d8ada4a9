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

The guard's callbacks are functions made for each callback name with the Observer method's parameters (see
``_CALLBACK``) and stored on the instance (no bound method to make per call); the lock is held here and nowhere
else in the adapter, so its hot paths stay free of locking code.
"""

import inspect
from threading import get_ident

from ...autograd.observer import Observer

CALLBACKS = tuple(name for name in vars(Observer) if name.startswith("on_"))

# One callback of the guard, made per name with the Observer method's own parameters: the engine's call and the
# call into the adapter are plain calls with the arguments as given (no ``*args``/``**kwargs`` packed and
# unpacked), and one ``get_ident()``. Measured per callback (a no-op adapter method, 100,000 calls, medians):
# 170 ns against 220 ns for the ``*args`` closure; ``with lock:`` measured no better than that closure.
_CALLBACK = """
def {name}({params}):
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
            failed({name!r}, exc)
        finally:
            release()
"""


class Guard(Observer):
    """Forwards every ``Observer`` callback to ``adapter`` (an ``Observer`` with ``thread_ident`` and
    ``switch_thread()``, like the builder's) under ``builder.lock``, while ``active``."""

    def __init__(self, adapter, builder):
        self.adapter = adapter
        self.builder = builder
        self.active = False
        for name in CALLBACKS:
            setattr(self, name, self._guarded(name, getattr(adapter, name)))

    def _guarded(self, name, target):
        params = list(inspect.signature(getattr(Observer, name)).parameters.values())[1:]  # without self
        source = _CALLBACK.format(name=name, params=", ".join(str(p) for p in params),
                                  args=", ".join(p.name for p in params))
        lock = self.builder.lock
        scope = {"guard": self, "acquire": lock.acquire, "release": lock.release, "builder": self.builder,
                 "adapter": self.adapter, "target": target, "failed": self.builder.internal_error,
                 "get_ident": get_ident}
        exec(compile(source, __file__, "exec"), scope)  # this file: frames.py counts it as gradviz's own
        return scope[name]

    def missed(self, thread):
        """``thread`` was started by code the trace does not observe (threads.py): the document lists it."""
        self.builder.note_thread(thread)

    def __repr__(self):
        return f"<gradviz trace guard {'active' if self.active else 'stopped'} for {type(self.adapter).__name__}>"
