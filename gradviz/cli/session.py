"""Trace one run of a user's script and hand back the trace document with how the script ended.

Shared by ``gradviz run`` and ``gradviz graph SCRIPT``. Nothing here prints except the optional live progress
line, which lives on the output object's console and only on a terminal.
"""

import os
from contextlib import ExitStack
from dataclasses import dataclass

from .runner import RunResult, compile_script, location_of, run_code, safe_str


@dataclass
class TracedRun:
    doc: dict
    result: RunResult


def trace_script(path, args=(), torch=False, output=None, progress=False, check_backward=True, engine="gradviz",
                 exact_memory=False, schedule=None, started=None, unseen=None, code=None, module=None):
    """Compile ``path`` (``ScriptError`` if it can't run), run it under a trace, and return a ``TracedRun``.

    ``torch=True`` makes ``import torch`` resolve to gradviz for the run; ``engine`` is the trace's (``auto``,
    ``gradviz``, ``torch``: see ``cli/engine.py``; ``exact_memory`` as for ``gradviz.trace``). ``progress=True``
    shows a live line (backward calls, iterations, retained memory) on ``output``'s console while the script runs.
    ``schedule``: ``gradviz.trace``'s ``light`` / ``full_steps`` / ``trace_steps`` (None: every iteration in full).
    ``started(tr)`` is called once the trace is active, before the script runs (child and rank tracing).
    ``unseen``: ``builder.unseen`` keyword arguments for what the run will not watch (``EngineChoice.unseen``).
    ``code``: ``path`` already compiled (``compile_script``), when the caller checked it could run.
    ``module``: a ``runner.Module`` (``compile_module``) to run as ``python -m`` would; ``path`` is then its file.
    """
    import gradviz

    if module is not None:
        path, code = module.path, module.code
    if code is None:
        code = compile_script(path)
    tr = gradviz.trace(check_backward=check_backward, engine=engine, exact_memory=exact_memory, **(schedule or {}))
    tr.script = path
    with ExitStack() as stack:
        if torch:
            from .torch_shim import TorchShim

            stack.enter_context(TorchShim())
        tr.__enter__()
        if unseen:
            tr.builder.unseen(unseen["kind"], unseen["what"], how=unseen.get("how"), advice=unseen.get("advice"))
        if started is not None:
            started(tr)
        if progress and output is not None:  # started by traced code: its refresh thread is not "unobserved"
            stack.enter_context(_live_progress(output, tr))
        result = None
        try:
            result = run_code(code, path, args, spec=module.spec if module is not None else None)
        finally:
            # the trace records how the block ended, as if the script's exception had passed through it
            exc = result.exception if result is not None else None
            if result is not None and result.module is not None:
                tr.user_scope = vars(result.module)  # what the script's names hold at its end (holders.py)
            try:
                tr.__exit__(type(exc) if exc else None, exc, exc.__traceback__ if exc else None)
            except Exception:  # the exception's own __str__ raised while the trace summarised it
                tr.stop()
    doc = tr.to_dict()
    _explain_blind_spots(doc, engine, result)
    # the script's globals were alive until now, as at the end of `python script.py`: what they hold (a
    # `total_loss` keeping every graph) is what the trace reports as retained; now they may go
    result.module = None
    _complete_document(doc, path, result)
    return TracedRun(doc, result)


def _explain_blind_spots(doc, engine, result):
    """A run that saw no autograd work: the likely reason, from the script's globals (read while they live)."""
    from .blind_spots import explain_no_autograd

    try:
        module = result.module
        explain_no_autograd(doc, engine, vars(module) if module is not None else {})
    except Exception as exc:  # a reason is a nicety: the report must still be written
        doc["internal_errors"].append({"where": "no-autograd reason", "type": type(exc).__name__,
                                       "message": str(exc).split("\n")[0]})


def _complete_document(doc, path, result):
    """Fill in what only the runner knows: which script ran and how it ended (``status``: ``completed``,
    ``ending``, ``exit_code``, ``exception`` with a message that is safe to show even when ``__str__`` fails)."""
    if not doc.get("script"):
        doc["script"] = path
    status = dict(doc.get("status") or {})
    exc = result.exception
    if exc is not None:
        recorded = status.get("exception") or {}
        message = safe_str(exc).split("\n")[0]
        status["exception"] = {"type": type(exc).__name__, "message": message,
                               "location": recorded.get("location") or _location_record(location_of(exc))}
    else:
        status["exception"] = None
    status["completed"] = exc is None and result.exit_code == 0
    status["ending"] = result.ending
    status["exit_code"] = result.exit_code
    if result.exit_message:
        status["exit_message"] = result.exit_message
    unsupported = getattr(exc, "torch_name", None)
    if unsupported:
        status["unsupported"] = unsupported  # the report says the run stopped there, unchecked after it
    doc["status"] = status


def _location_record(where):
    if where is None:
        return None
    file, _, line = where.rpartition(":")
    return {"file": file, "line": int(line), "text": _source_line(file, int(line)), "function": None}


def _source_line(file, line):
    import linecache

    return linecache.getline(file, line).strip() if os.path.exists(file) else ""


class _live_progress:
    """A transient live line refreshed from a timer thread, reading the trace's counters."""

    def __init__(self, output, tr):
        self.output = output
        self.tr = tr
        self.live = None

    def __rich__(self):
        return progress_text(self.tr)

    def __enter__(self):
        from rich.live import Live

        self.live = Live(self, console=self.output.out, transient=True, refresh_per_second=4,
                         redirect_stdout=True, redirect_stderr=True)
        self.live.__enter__()
        return self

    def __exit__(self, *exc_info):
        self.live.__exit__(*exc_info)


def progress_text(tr):
    """``running… 12 backward calls · 12 iterations · 1.2 MB retained`` from the trace's live counters."""
    from rich.text import Text

    stats = getattr(tr, "stats", None)
    backwards = _stat(stats, "backward_calls", "backwards")
    iterations = _stat(stats, "iterations", "iteration")
    retained = _stat(stats, "retained_bytes", "retained")
    return Text(f"running… {backwards} backward calls · {iterations} iterations · {format_bytes(retained)} retained",
                style="dim")


def _stat(stats, *names):
    for name in names:
        value = stats.get(name) if isinstance(stats, dict) else getattr(stats, name, None)
        if value is not None:
            return value
    return 0


def format_bytes(n):
    from ..rendering.style import human_bytes

    return human_bytes(n)
