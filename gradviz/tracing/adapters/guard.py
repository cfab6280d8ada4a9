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

The guard's callbacks are closures stored on the instance (no bound method to make per call); the lock is held
here and nowhere else in the adapter, so its hot paths stay free of locking code.
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
        for name in CALLBACKS:
            setattr(self, name, self._guarded(name, getattr(adapter, name)))

    def _guarded(self, name, target):
        builder = self.builder
        adapter = self.adapter
        acquire = builder.lock.acquire
        release = builder.lock.release
        failed = builder.internal_error
        guard = self

        def callback(*args, **kwargs):
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

    def many_threads(self):
        """A thread is starting while the trace is active (threads.py): an adapter that skips the lock while its
        thread is alone (``many_threads()``) stops doing so."""
        hook = getattr(self.adapter, "many_threads", None)
        if hook is not None:
            hook()

    def missed(self, thread):
        """``thread`` was started by code the trace does not observe (threads.py): the document lists it."""
        self.builder.note_thread(thread)

    def __repr__(self):
        return f"<gradviz trace guard {'active' if self.active else 'stopped'} for {type(self.adapter).__name__}>"
