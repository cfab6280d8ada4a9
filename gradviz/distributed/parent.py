"""The traced script's side: every process it starts is noted (how, where, its pid), so that the report can say
which children were traced and which left no document, and why.

While the script runs: the settings are exported (``config.export``), ``multiprocessing`` children are traced
(``child.install``; a fork inherits it), ``BaseProcess.start`` is wrapped to note each start, and
``subprocess.Popen`` to note Python interpreters started directly, which are not traced.
"""

import multiprocessing.process as mp_process
import os
import subprocess
import sys
from contextlib import contextmanager

from . import child
from .config import export


class Children:
    """What the script started: ``processes`` (``{"pid", "how", "index", "location"}`` per ``multiprocessing``
    start) and ``subprocesses`` (``{"how", "location"}`` per Python interpreter started with ``Popen``)."""

    def __init__(self):
        self.processes = []
        self.subprocesses = []
        self._objects = []  # the Process objects, for their exit codes once the script is over

    def settle(self):
        """Each started process's exit code as it stands now (None: still running, or never joined)."""
        for record, process in zip(self.processes, self._objects):
            try:
                record["exitcode"] = process.exitcode
            except Exception:  # a process object in an odd state: its exit code is unknown
                record["exitcode"] = None


def _where():
    from ..tracing.frames import location_of, user_frame

    loc = location_of(user_frame(3))
    return loc.as_dict() if loc is not None else None


def _wrap_start(children):
    original = mp_process.BaseProcess.start

    def start(self):
        mine = os.getpid() == watching[0]  # not a start made by a child (a fork carries this wrapper along)
        how, index = child.how_started(self) if mine else (None, None)  # before: start() forgets the target
        result = original(self)
        if mine:
            children.processes.append({"pid": self.pid, "how": how, "index": index, "location": _where()})
            children._objects.append(self)
        return result

    watching = [os.getpid()]
    mp_process.BaseProcess.start = start
    return lambda: setattr(mp_process.BaseProcess, "start", original)


def _generated(path):
    """Code a library wrote and imported itself (inductor's kernels under ``<tmp>/torchinductor_<user>/``): not
    the script's, though it lives outside every library folder."""
    return any(part.startswith("torchinductor_") for part in path.split(os.sep))


def _main_thread_where():
    """The innermost line of the script itself in the main thread's stack, now."""
    import linecache
    import threading

    from ..tracing.frames import _is_internal

    frame = sys._current_frames().get(threading.main_thread().ident)
    while frame is not None and (_is_internal(frame.f_code) or _generated(frame.f_code.co_filename)):
        frame = frame.f_back
    if frame is None:
        return None
    code = frame.f_code
    return {"file": code.co_filename, "line": frame.f_lineno, "function": code.co_name,
            "text": linecache.getline(code.co_filename, frame.f_lineno).strip()}


def _is_python(args):
    program = args if isinstance(args, (str, bytes, os.PathLike)) else (args[0] if args else "")
    program = os.fsdecode(program).split()[0] if program else ""
    name = os.path.basename(program)
    return program == sys.executable or name.startswith("python")


def _command_text(args):
    words = [args] if isinstance(args, (str, bytes, os.PathLike)) else list(args)
    text = " ".join(os.fsdecode(w) if isinstance(w, (bytes, os.PathLike)) else str(w) for w in words[:3])
    return text if len(words) <= 3 else text + " …"


def library_starting():
    """The installed package whose code called ``Popen`` (``torch`` for torch.compile's compile workers), or
    None when the script's own code did: a library's helpers are its business, listed as one line."""
    from ..tracing.frames import _LIBRARY_DIRS

    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename in (__file__, subprocess.__file__):
        frame = frame.f_back
    path = os.path.abspath(frame.f_code.co_filename) if frame is not None else ""
    folders = [f for f in _LIBRARY_DIRS if path.startswith(f) and os.sep in path[len(f):]]
    if not folders:
        return None
    folder = max(folders, key=len)  # site-packages inside a venv's lib/pythonX.Y: the package, not "site-packages"
    top = path[len(folder):].split(os.sep)[0]
    return None if top in ("gradviz", "multiprocessing", "concurrent", "site-packages") else top


def _wrap_popen(children):
    original = subprocess.Popen.__init__

    def __init__(self, args, *rest, **kwargs):
        try:
            if _is_python(args) and os.getpid() == pid:
                library = library_starting()
                how = f"subprocess.Popen from {library}'s own code" if library else \
                    f"subprocess.Popen {_command_text(args)}"
                # a library may start its helpers from a thread of its own, whose stack runs through code it
                # generated (inductor's): the line is the one the script's main thread was running
                where = _main_thread_where() if library else _where()
                children.subprocesses.append({"how": how, "location": where, "library": library})
        except Exception:  # noting it is a nicety; the start must happen as without the trace
            pass
        original(self, args, *rest, **kwargs)

    pid = os.getpid()
    subprocess.Popen.__init__ = __init__
    return lambda: setattr(subprocess.Popen, "__init__", original)


@contextmanager
def watch(config, trace=None):
    """Children of the block are traced into ``config``'s folder; yields the ``Children`` it started."""
    os.makedirs(config["folder"], exist_ok=True)
    restore_env = export(config)
    child.install(config, inherited_trace=trace)
    try:
        with noting_children() as children:
            yield children
    finally:
        child.uninstall()
        restore_env()


@contextmanager
def noting_children():
    """Note every process this one starts during the block (``multiprocessing`` starts and Python ``Popen``s);
    yields the ``Children``, settled (exit codes read) when the block ends. A torchrun rank uses this alone: its
    settings are already in its environment and ``child.install`` is done by the rank."""
    children = Children()
    undo = [_wrap_start(children), _wrap_popen(children)]
    try:
        yield children
    finally:
        children.settle()
        for step in undo:
            step()
