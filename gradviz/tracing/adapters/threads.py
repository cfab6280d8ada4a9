"""Plain threads started while a trace is active run with the trace attached.

The engine finds its observers in a context variable, and a ``threading.Thread`` starts with an empty context:
without help, ops in a thread the traced code starts would never be seen. While at least one observer asks for it
(``adopt``), ``Thread.start`` is wrapped: a thread started where such an observer is attached (the traced code,
or a thread it started) attaches it in its own context before its ``run`` — that, and nothing else of the
starting thread's context (a thread started under ``no_grad()`` still records a graph, as without gradviz). So
two traces running in two threads each get their own threads. ``release`` undoes it; the wrapper is removed
once nobody asks (left in place, doing nothing, only if someone else wrapped ``Thread.start`` over it since).

Whatever thread starts, observed or not, the adopting observers hear of it first (``many_threads``): an
adapter that skips its lock while the traced thread is alone must take it from then on.

Threads that inherit a context (``asyncio.to_thread``, ``contextvars.copy_context().run``) need none of this;
threads already running when the trace started cannot be reached (the document lists them, see builder.py).
"""

import threading

from ...autograd import observer as _observer

_adopting = []  # observers that want the threads started where they are attached, in the order they asked
_original_start = threading.Thread.start  # what the wrapper calls (taken again when it is installed)
_installed = False
_lock = threading.Lock()  # two traces starting or stopping in two threads at once


def adopt(obs):
    """Threads started where ``obs`` is attached attach it too (until ``release(obs)``)."""
    global _original_start, _installed
    with _lock:
        if obs in _adopting:
            return
        _adopting.append(obs)
        if not _installed:
            _original_start = threading.Thread.start
            threading.Thread.start = _start
            _installed = True


def release(obs):
    """Threads started from now on no longer attach ``obs``."""
    global _installed
    with _lock:
        if obs in _adopting:
            _adopting.remove(obs)
        if not _adopting and _installed and threading.Thread.start is _start:
            threading.Thread.start = _original_start
            _installed = False


def _start(self):
    if _adopting:
        for obs in list(_adopting):  # before the thread runs: no adapter goes on without its lock
            obs.many_threads()
        attached = _observer.active()
        observers = tuple(o for o in _adopting if o in attached)
        if observers:
            self.run = _observed_run(self, self.run, "run" in self.__dict__, observers)
        for obs in _adopting:
            if obs not in observers:  # started by code that trace does not observe: it says so
                obs.missed(self)
    return _original_start(self)


_start.__doc__ = threading.Thread.start.__doc__


def _observed_run(thread, run, own, observers):
    def run_observed():
        if own:  # the thread's own run again (and no cycle through this closure)
            thread.run = run
        else:
            del thread.run
        for obs in observers:
            if obs.active:  # the trace may have stopped since the thread was started
                _observer.attach(obs)
        run()

    return run_observed
