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
calls the guard's closure (stored on the instance: no bound method made per call), which calls the method.
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
    builder = guard.builder
    adapter = guard.adapter
    lock = builder.lock
    acquire = lock.acquire
    release = lock.release
    failed = builder.internal_error

    def callback(*args, **kwargs):
        if guard.solo:  # the usual case: active, one thread, nothing to lock or switch
            try:
                target(*args, **kwargs)
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
                    target(*args, **kwargs)
            except Exception as exc:
                failed(name, exc)
            finally:
                release()

    callback.__name__ = name
    return callback
