"""``ThreadBook``: the threads a trace hears from, and the state that is per thread by nature.

A ``TraceBuilder`` collaborator (builder.py). Facts may come from several threads, one at a time under the builder's
lock; what belongs to one thread (the backward call in progress, the module call stack, the last ``.grad`` read)
is kept in a ``ThreadState`` per thread and loaded into the builder's plain attributes when that thread reports
(``TraceBuilder.switch_thread``), so the fact methods read them at no cost. The book also lists the threads that
built a graph or ran a backward, and those it never heard from (``unobserved_threads``).
"""

import threading
import weakref
from threading import get_ident

# Threads of libraries that only keep their own books, by the package of their class: tqdm's monitor (started by
# the first progress bar: a Lightning fit, torch.compile's) wakes to refresh bars; a Jupyter kernel's own threads
# (IOPub, Heartbeat, Control, pyzmq's garbage collector) carry its messages. None runs a tensor op, and left running
# for the rest of the process, each would be listed as unseen work in every trace after it.
_HOUSEKEEPING = ("tqdm.", "zmq.", "ipykernel.", "jupyter_client.", "IPython.")


def may_work_beside(thread):
    """Whether ``thread``, running when a trace starts, may do work the trace cannot see. Not a library's
    bookkeeping thread (``_HOUSEKEEPING``), nor a thread Python did not start (``threading._DummyThread``): one of
    those is in ``threading``'s table because it once called into Python, and it stays there, "alive", after the
    thread has ended (RPC's server threads, after ``rpc.shutdown``). A call RPC serves on one is observed by the
    torch adapter's wrapper (adapters/torch/rpc.py), not by the thread's own context."""
    return not isinstance(thread, threading._DummyThread) and not type(thread).__module__.startswith(_HOUSEKEEPING)


class ThreadState:
    """What the builder keeps for one thread while another thread's state is loaded (see ``switch_thread``)."""

    __slots__ = ("backward", "visited", "grad_norms", "module_stack", "module_keys", "last_grad_read", "info",
                 "thread", "listed")

    def __init__(self, thread):
        self.backward = self.visited = self.grad_norms = self.last_grad_read = None
        self.module_stack = ()
        self.module_keys = []
        self.info = {"name": thread.name, "ident": thread.ident}  # the document's name for the thread
        self.thread = weakref.ref(thread)
        self.listed = False  # whether ``builder.threads`` lists it yet


class ThreadBook:
    """Every thread's ``ThreadState``, the one loaded now (``current``), and the threads seen and not seen."""

    def __init__(self):
        self.current = ThreadState(threading.current_thread())  # whose state the builder's attributes hold
        self.states = {get_ident(): self.current}  # ident -> ThreadState
        self.threads = []  # {"name", "ident"} of every thread that started a graph or ran a backward
        self._observed = weakref.WeakSet()  # their Thread objects
        self._running_at_start = []  # (Thread, {"name", "ident", "daemon"}) of the other threads then

    def load(self):
        """The calling thread's state, made if it is new (perhaps with an ended thread's ident), now ``current``."""
        ident = get_ident()
        thread = threading.current_thread()
        state = self.states.get(ident)
        if state is None or state.thread() is not thread:
            state = self.states[ident] = ThreadState(thread)
        self.current = state
        return state

    def thread(self):
        """``{"name", "ident"}`` of the thread whose facts are being reported (graphs and backward calls say
        which thread built them)."""
        state = self.current
        if not state.listed:
            state.listed = True
            self.threads.append(state.info)
            thread = state.thread()
            if thread is not None:
                self._observed.add(thread)
        return state.info

    def note_running_threads(self):
        """The trace starts: remember the other threads running now. Their context was made before the trace,
        so an adapter that attaches per context or per new thread cannot observe them (``unobserved_threads``)."""
        me = threading.current_thread()
        self._running_at_start = [(t, {"name": t.name, "ident": t.ident, "daemon": t.daemon})
                                  for t in threading.enumerate() if t is not me and may_work_beside(t)]

    def note_thread(self, thread):
        """A thread started while tracing by code the trace does not observe (it will not be observed either,
        unless it reports facts some other way): listed by ``unobserved_threads`` if it reports nothing."""
        if may_work_beside(thread):
            self._running_at_start.append((thread, {"name": thread.name, "ident": None, "daemon": thread.daemon}))

    def unobserved_threads(self):
        """Threads running when the trace started, or started by code it does not observe, that reported
        nothing to it (their ops, if any, are not in the document)."""
        observed = self._observed
        found = []
        for thread, info in self._running_at_start:
            if thread not in observed:
                found.append(dict(info, ident=thread.ident))  # known once started
        return found

