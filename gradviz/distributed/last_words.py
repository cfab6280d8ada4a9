"""A traced process that is told to stop (SIGTERM: torchrun tearing a job down, a timeout, ``Process.terminate``)
still writes its document, with the line its main thread was on.

Python runs signal handlers on the main thread between bytecodes, so a rank stuck in a collective (gloo waits in
C++ with the GIL released) would never run one. Where we start the process ourselves, SIGTERM is blocked in the
main thread before any other thread exists (every later thread inherits the mask), and a thread of ours takes it
with ``sigwaitinfo``: it stops the trace, writes the document (with the pid that sent the signal: torchrun's
teardown or a ``kill`` from outside) and exits with status 128 + 15, as the signal would have. Elsewhere (a
forked child inherits its parent's mask) a plain handler does the same from the main thread, sender unknown.
"""

import os
import signal
import sys
import threading
import time

_BLOCKED = [False]


def block_early():
    """Block SIGTERM in this (main) thread, before other threads start, so that only ``arm``'s thread takes it.
    Only for processes that will ``arm``: a blocked SIGTERM with nobody waiting for it would never stop them."""
    if hasattr(signal, "pthread_sigmask") and threading.current_thread() is threading.main_thread():
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        _BLOCKED[0] = True


def main_thread_location():
    """``{"file", "line", "function", "text"}`` of the innermost user frame of the main thread, now."""
    from ..tracing.frames import _is_internal

    frame = sys._current_frames().get(threading.main_thread().ident)
    while frame is not None and _is_internal(frame.f_code):
        frame = frame.f_back
    if frame is None:
        return None
    import linecache

    code = frame.f_code
    where = {"file": code.co_filename, "line": frame.f_lineno, "function": code.co_name,
             "text": linecache.getline(code.co_filename, frame.f_lineno).strip()}
    waiting = waiting_in(sys._current_frames().get(threading.main_thread().ident))
    if waiting:
        where["waiting_in"] = waiting
    return where


# where torch's Python code hands a rank over to C++ that waits for the other ranks
_C10D = os.path.join("torch", "distributed", "")
_DDP = os.path.join("torch", "nn", "parallel", "distributed.py")
_AUTOGRAD = (os.path.join("torch", "autograd", ""), os.path.join("torch", "_tensor.py"))
_WRAPPERS = {"wrapper", "_fn", "inner", "decorate_context"}  # decorators around a collective, not the collective


def waiting_in(frame):
    """What the stack shows the thread waiting in: a ``torch.distributed`` call (``all_reduce``, ``barrier``…),
    ``DistributedDataParallel.forward`` (its buffer broadcast), ``backward`` (where DDP all-reduces gradients), or
    None. The innermost such frame wins: it is the Python call whose C++ is blocked."""
    while frame is not None:
        path, name = frame.f_code.co_filename, frame.f_code.co_name
        if _C10D in path and name not in _WRAPPERS and not name.startswith("_"):
            return name
        if path.endswith(_DDP):
            return "DistributedDataParallel.forward"
        if any(part in path for part in _AUTOGRAD) and name == "backward":
            return "backward"
        frame = frame.f_back
    return None


class LastWords:
    """``arm(write)``: on SIGTERM, call ``write(signal_name, location, when, sender)`` once (it builds and writes
    the document; ``sender`` is the pid that sent the signal, None where a plain handler cannot know), then end
    the process with 128 + the signal number. ``ending()``: the script has ended and the main thread writes the
    document now; a SIGTERM from then on waits for that document rather than write a second one over it (without
    the script's line: the main thread is in gradviz's code). ``done()``: the document is written; a SIGTERM from
    now on just ends the process."""

    def __init__(self):
        self._lock = threading.RLock()  # the main thread's own handler may run while it holds it
        self._write = None
        self._finished = False
        self._ending = False
        self._deferred = None  # a signal the main thread's own handler took while it was writing
        self._saved = threading.Event()

    def arm(self, write):
        self._write = write
        if _BLOCKED[0]:
            threading.Thread(target=self._wait, name="gradviz-last-words", daemon=True).start()
        elif threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, lambda signum, frame: self._die(signum))

    def ending(self):
        with self._lock:
            self._ending = True

    def done(self):
        with self._lock:
            self._finished = True
            deferred = self._deferred
        self._saved.set()
        if deferred is not None:
            self._exit(deferred)

    def _wait(self):
        if hasattr(signal, "sigwaitinfo"):
            info = signal.sigwaitinfo({signal.SIGTERM})
            self._die(info.si_signo, info.si_pid or None)
        else:
            self._die(signal.sigwait({signal.SIGTERM}))

    def _die(self, signum, sender=None):
        with self._lock:
            waits = self._ending and not self._finished
            if waits and threading.current_thread() is threading.main_thread():
                self._deferred = signum  # the handler interrupted the main thread's own writing: done() exits
                return
            if not waits and not self._finished and self._write is not None:
                self._finished = True
                when = time.time()  # before the document is built: that takes a while, and ranks are compared by it
                try:
                    self._write(signal.Signals(signum).name, main_thread_location(), when, sender)
                except Exception as exc:  # the exit must happen whatever: say why there is no document
                    sys.stderr.write(f"gradviz: could not write this process's document: {exc}\n")
        if waits:
            from .record import KILLED_BUILD_TIMEOUT

            self._saved.wait(KILLED_BUILD_TIMEOUT)
        self._exit(signum)

    @staticmethod
    def _exit(signum):
        for stream in (sys.stdout, sys.stderr):  # a line the script printed is not lost in a buffer
            try:
                stream.flush()
            except Exception:  # a closed or broken stream: the exit matters more
                pass
        os._exit(128 + signum)
