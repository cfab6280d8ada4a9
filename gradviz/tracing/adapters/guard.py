"""``Guard``: what the engine actually calls when a trace watches gradviz's engine. It makes one adapter safe to
call from any thread, at any time, from inside the user's code.

The guard
- calls nothing unless the trace is active (``active``: a flag, so ``stop()`` from another thread stops every
  context the guard is attached in, not only the caller's);
- holds the builder's lock while the adapter turns a callback into facts (facts from several threads never
  interleave; the lock is re-entrant, see builder.py), and when the calling thread is not the one whose state
  is loaded, switches the builder's and the adapter's per-thread state (``switch_thread``: a thread's backward
  in progress, module calls…) — rare (at most once per thread switch), so the hot paths read plain attributes;
- never lets an error reach the user's code: an exception inside the adapter is recorded in the document's
  ``internal_errors`` and the user's op goes on (KeyboardInterrupt and other BaseExceptions pass through).

Two sets of callbacks, one installed at a time on the instance (where the engine's ``o.on_function(...)`` finds
them first):
- **alone** (``solo``: the trace is active and the traced code runs no other thread — none when the trace
  started, none started since; threads.py calls ``many_threads`` before a new thread runs, which ends it for
  good): the adapter's own bound methods. No lock to take, no thread to switch, and no Python frame between the
  engine and the adapter; an adapter's exception is caught where the engine made the call and handed to
  ``callback_failed`` (observer.py), which records it.
- **shared** (the trace is active and several threads may call): ``shared``'s closures, which check ``active``,
  take the lock, switch the thread's state and record the adapter's errors themselves; made the first time.
- **stopped** (before the trace starts and after it stops): one function that does nothing, for every callback
  (a context the guard is still attached in may call).
"""

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
        self.solo = False  # the adapter's methods are installed (see the module docstring)
        self._alone = {name: getattr(adapter, name) for name in CALLBACKS}
        self._shared = None  # made when first needed (most traces never run a second thread)
        vars(self).update(_STOPPED)

    def start(self, solo):
        """The trace starts, its thread alone (``solo``) or not. Call from the thread that runs the traced code,
        before the guard is attached."""
        self.active = True
        self.set_solo(solo)

    def stop(self):
        """The trace stops, in every context the guard is still attached in (call with the builder's lock held)."""
        self.solo = False
        self.active = False  # (a shared callback already past its first check sees it under the lock)
        vars(self).update(_STOPPED)

    def set_solo(self, solo):
        """Install the callbacks for an active trace whose thread is alone (``solo``) or not: from the thread
        that runs the traced code, before any other thread can call back."""
        self.solo = solo
        if solo:
            vars(self).update(self._alone)
            return
        if self._shared is None:
            self._shared = {name: shared(self, name, method) for name, method in self._alone.items()}
        vars(self).update(self._shared)

    def callback_failed(self, callback, exc):
        """The adapter's method raised (called alone, without a frame of the guard's around it): recorded."""
        self.builder.internal_error(callback, exc)

    def many_threads(self):
        """A thread is starting while the trace is active (threads.py): from now on every callback takes the
        lock (and so does an adapter that skips it while its thread is alone, told by its ``many_threads()``)."""
        if self.active:
            self.set_solo(False)
        hook = getattr(self.adapter, "many_threads", None)
        if hook is not None:
            hook()

    def missed(self, thread):
        """``thread`` was started by code the trace does not observe (threads.py): the document lists it."""
        self.builder.note_thread(thread)

    def __repr__(self):
        return f"<gradviz trace guard {'active' if self.active else 'stopped'} for {type(self.adapter).__name__}>"


def _ignore(*args, **kwargs):
    """Every callback of a stopped guard."""


_STOPPED = dict.fromkeys(CALLBACKS, _ignore)


def shared(guard, name, target):
    """Callback ``name`` of ``guard`` while threads share the trace: ``target`` (the adapter's method) under the
    builder's lock, in the calling thread's state, its errors recorded. (It forwards ``*args, **kwargs``: ~90 ns
    more a call than the method's own parameters would cost, next to a lock taken on every call.)"""
    builder = guard.builder
    adapter = guard.adapter
    lock = builder.lock
    failed = builder.internal_error

    def callback(*args, **kwargs):
        if not guard.active:
            return
        with lock:
            try:
                if guard.active:  # again, under the lock: a stop() may have come in between
                    me = get_ident()
                    if builder.thread_ident != me:
                        builder.switch_thread()
                    if adapter.thread_ident != me:
                        adapter.switch_thread()
                    target(*args, **kwargs)
            except Exception as exc:
                failed(name, exc)

    callback.__name__ = callback.__qualname__ = name
    return callback
