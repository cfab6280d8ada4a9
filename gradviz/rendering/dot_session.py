"""Long-lived ``dot -Tsvg`` (and ``-Tdot``) processes for a run that lays out many graphs.

Starting ``dot`` costs about 15 ms of CPU (its plugins and fonts) whatever the graph, more than laying out a
small one: ``gradviz run`` on an MLP started it four times (the picture file, the page's overview, a box's
inside) and spent 65 ms of its 80 ms of drawing there. ``dot`` reads graph after graph from its input and writes
each one's SVG as soon as that graph is read, so inside ``session()`` every SVG layout goes to a process
already started, one graph at a time (writing a second graph while the first one's SVG fills the pipe would
deadlock both sides). A process that runs past its time is killed; one that exits (a syntax error, a crash) is
dropped, and ``run`` returns None so that the caller runs ``dot`` once on its own for the error message.

The processes are shared by the threads a page lays out its views in, so the session is a context variable
that those threads are given (``views._map``); nested ``session()`` blocks use the outer one.
"""

import contextlib
import contextvars
import os
import re
import selectors
import subprocess
import threading
import time

from . import dot_text
from .cluster_order import in_declared_order
from .dot_program import dot_program

_ACTIVE = contextvars.ContextVar("gradviz_dot_session", default=None)
_GRAPH_START = re.compile(r"(?m)^(?=digraph \{$)")  # how ``dot.to_dot`` starts every graph
_ENDS = {"svg": b"</svg>", "dot": b"\n}"}  # how each format's output of one graph ends (after its last newline)
# how a drawing of one graph ends, by format: a PNG's IEND chunk and its CRC, a PDF's trailer
_DRAWN_ENDS = {"png": b"IEND\xaeB`\x82", "pdf": b"%%EOF\n", "svg": b"</svg>\n"}
_ANONYMOUS = re.compile(rb"<!-- Title: (%\d+) Pages")
_PAGED = re.compile(rb'<g id="page\d+,\d+_graph0" class="graph"')


class Timeout(Exception):
    """The graph did not lay out within the time given (its process was killed)."""


class Session:
    def __init__(self, exe):
        self.exe = exe
        self.idle = {}  # format -> processes waiting for a graph
        self.lock = threading.Lock()
        self.anonymous = None  # the name a fresh dot gives the first anonymous graph it reads
        self.drawn = {}  # (format, laid-out DOT) -> a drawing made beside another format's, until asked for

    def run(self, source, timeout, fmt="svg"):
        """The SVG (``fmt`` "svg") or laid-out DOT ("dot": every position, for a PNG or PDF drawn from it) of every
        graph in ``source`` (DOT text from ``to_dot``, one graph or several), or None when a process exited on
        it; raises ``Timeout`` after ``timeout`` seconds."""
        graphs = [part for part in _GRAPH_START.split(source) if part.strip()]
        if not graphs or not all(part.startswith("digraph {") for part in graphs):
            return None  # not DOT as gradviz writes it: a plain ``dot`` run reads it
        deadline = time.monotonic() + timeout
        with self.lock:
            idle = self.idle.setdefault(fmt, [])
            process = idle.pop() if idle else None
        if process is None:
            process = subprocess.Popen([self.exe, f"-T{fmt}"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       stderr=subprocess.DEVNULL,
                                       env=dot_text.environment() if fmt == "svg" else None)
        out = []
        try:
            for graph in graphs:
                data = _one(process, graph, deadline, _ENDS[fmt])
                if data is None:
                    _stop(process)
                    return None
                out.append(in_declared_order(self.named(data), graph) if fmt == "svg" else data)
        except BaseException:
            _stop(process)
            raise
        with self.lock:
            self.idle[fmt].append(process)
        return b"".join(out)

    def draw(self, laid, formats, timeout):
        """[bytes] of one laid-out graph (``dot -Tdot``'s output) drawn in each of ``formats`` (png, pdf, svg) by
        ``dot -Kneato -n2``, which draws the positions it is given without laying out again: one process for
        each set of formats, started once. None when the process exited on it; ``Timeout`` past ``timeout``."""
        deadline = time.monotonic() + timeout
        key = ("drawn",) + tuple(formats)
        with self.lock:
            idle = self.idle.setdefault(key, [])
            process = idle.pop() if idle else None
        if process is None:
            process = subprocess.Popen([self.exe] + [f"-T{fmt}" for fmt in formats] + ["-Kneato", "-n2"],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        try:
            parts = _drawings(process, laid, deadline, [_DRAWN_ENDS[fmt] for fmt in formats])
        except BaseException:
            _stop(process)
            raise
        if parts is None:
            _stop(process)
            return None
        with self.lock:
            self.idle[key].append(process)
        return [self.named(part) if fmt == "svg" else part for fmt, part in zip(formats, parts)]

    def named(self, svg):
        """``svg`` as a fresh ``dot`` writes it: dot numbers anonymous graphs as it reads them (``%3``, then
        ``%7``…) and the graph element of every graph after the first ``page0,1_graph0``, and a picture must not
        depend on what the process laid out before it."""
        svg = _PAGED.sub(b'<g id="graph0" class="graph"', svg, count=1)
        found = _ANONYMOUS.search(svg)
        if found is None:
            return svg
        with self.lock:
            if self.anonymous is None:  # the first graph laid out, by a fresh process
                self.anonymous = found.group(1)
        name = found.group(1)
        if name == self.anonymous:
            return svg
        head, title, rest = svg.partition(b"<title>" + name + b"</title>")
        return _ANONYMOUS.sub(b"<!-- Title: " + self.anonymous + b" Pages", head, count=1) + \
            (b"<title>" + self.anonymous + b"</title>" if title else b"") + rest

    def close(self):
        with self.lock:
            processes, self.idle = [p for idle in self.idle.values() for p in idle], {}
        for process in processes:
            with contextlib.suppress(OSError):
                process.stdin.close()  # dot ends when its input does
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            _stop(process)


def _one(process, graph, deadline, end=_ENDS["svg"]):
    """One graph's output from ``process``, read until it ends with ``end``; None when the process exits first."""
    parts = _drawings(process, graph, deadline, [end])
    return None if parts is None else parts[0]


def _drawings(process, graph, deadline, ends):
    """The outputs of one graph from ``process``, one per end marker in ``ends`` (dot writes each format's
    drawing in turn; dot escapes text, so a marker is only found at a drawing's end), or None when the process
    exits first."""
    try:
        process.stdin.write(graph.encode("utf-8") if graph.endswith("\n") else (graph + "\n").encode("utf-8"))
        process.stdin.flush()
    except OSError:
        return None
    text, fd = bytearray(), process.stdout.fileno()
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while True:
            parts, start = [], 0
            for end in ends:  # (a drawing is read to its end marker; the next one starts after it)
                at = text.find(end, start)
                if at < 0:
                    break
                parts.append(bytes(text[start:at + len(end)]))
                start = at + len(end)
            if len(parts) == len(ends) and not text[start:].strip():  # (dot ends a text output with a newline)
                parts[-1] += bytes(text[start:])
                return parts
            left = deadline - time.monotonic()
            if left <= 0 or not selector.select(left):
                raise Timeout()
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return None
            text += chunk


def _stop(process):
    """End ``process`` (if it has not ended) and close its pipes."""
    if process.poll() is None:
        with contextlib.suppress(OSError):
            process.kill()
    with contextlib.suppress(Exception):
        process.wait(timeout=5)
    for pipe in (process.stdin, process.stdout):
        with contextlib.suppress(OSError):
            pipe.close()


def active():
    """The session of this context, or None."""
    return _ACTIVE.get()


@contextlib.contextmanager
def session():
    """Lay out every SVG inside the block with ``dot`` processes started once (see the module's text)."""
    exe = dot_program()
    if _ACTIVE.get() is not None or exe is None:
        yield _ACTIVE.get()
        return
    current = Session(exe)
    token = _ACTIVE.set(current)
    try:
        yield current
    finally:
        _ACTIVE.reset(token)
        current.close()
