"""A traced process's own document: how it ended, who it is (``process``), written atomically under its own name."""

import os
import threading
import time

from ..document.process import process_section
from .config import document_path

KILLED_BUILD_TIMEOUT = 20.0  # seconds a killed process waits for its trace to stop before writing less


def save(doc, config, how, ending, exit_code, *, stopped_at=None, signal_name=None, index=None, rank=None,
         world_size=None, rpc=False, ended_at=None, signal_sender=None):
    """Complete ``doc`` (``status.ending``/``exit_code``/``ended_at``, the ``process`` section) and write it to the
    run's ``processes/`` folder as ``rank<r>-pid<pid>.json`` (``child-pid<pid>.json`` when no rank is known).
    ``ended_at``: the wall-clock time the process stopped (raised, was signalled), now if not given: the job's
    verdict orders the ranks' failures by it. ``signal_sender``: the pid that sent the signal that stopped it (the
    launcher tearing the job down, or another process), so the verdict can tell one from the other."""
    if not doc.get("script"):
        doc["script"] = config.get("script")
    status = dict(doc.get("status") or {})
    if ending == "killed" and status.get("exception"):
        # the script had raised (a gloo error after another rank went) and the signal came while gradviz was
        # still handling it: the exception and its line say how it ended, the signal is noted beside them
        ending, stopped_at = "exception", None
    status["ending"] = ending
    status["exit_code"] = exit_code
    status["completed"] = ending == "finished" and not exit_code
    status["ended_at"] = ended_at if ended_at is not None else time.time()
    if signal_name:
        status["signal"] = signal_name
    if signal_sender:
        status["signal_sender"] = signal_sender
    doc["status"] = status
    process = process_section(how, ending, run_id=config.get("run_id"), index=index, rank=rank,
                              world_size=world_size, stopped_at=stopped_at, rpc=rpc)
    doc["process"] = process
    role = f"rank{process['rank']}" if process["rank"] is not None else "child"
    path = document_path(config, role)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    from ..document import write_json

    write_json(doc, path)
    return path


def document_when_killed(tr):
    """Stop ``tr`` from this (signal-handling) thread and build its document; if that does not finish in time
    (the main thread died holding the trace's lock), an empty document that still says who stopped where."""
    built = {}

    def build():
        tr.stop()
        built["doc"] = tr.to_dict()

    worker = threading.Thread(target=build, name="gradviz-last-document", daemon=True)
    worker.start()
    worker.join(KILLED_BUILD_TIMEOUT)
    if "doc" in built:
        return built["doc"]
    import gradviz

    doc = gradviz.trace(engine="gradviz").to_dict()
    doc.setdefault("internal_errors", []).append(
        {"where": "last-words", "type": "Timeout",
         "message": f"the trace did not stop within {KILLED_BUILD_TIMEOUT:.0f} s of SIGTERM: its records are lost"})
    return doc
