"""``gradviz torchrun``: PyTorch's own elastic launcher (``python -m torch.distributed.run``), each rank running its
script under ``rank_worker``; and, for ``gradviz run``, the children of a traced script. Both end in ``merge``.
"""

import contextlib
import io
import os
import signal
import subprocess
import sys

from .config import PROCESSES, child_environment, new_config

# after SIGTERM, torchrun waits up to 30 s for the ranks before killing them: this much more, then we kill it
GRACE_SECONDS = 60


class LaunchError(Exception):
    """The job cannot be started as asked: a one-line message."""


def split_torchrun_args(argv):
    """``(torchrun options, script, script args)`` from ``gradviz torchrun``'s arguments, parsed by torchrun's
    own parser (so every torchrun option is understood as torchrun understands it)."""
    from torch.distributed.run import get_args_parser

    parser = get_args_parser()
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured):
            parsed = parser.parse_args(list(argv))
    except SystemExit:
        lines = [line for line in captured.getvalue().splitlines() if line.strip()]
        reason = lines[-1].split("error: ", 1)[-1] if lines else "bad arguments"
        if "training_script" in reason:
            raise LaunchError("no script to run: give SCRIPT after torchrun's options") from None
        raise LaunchError(f"torchrun options: {reason}") from None
    if parsed.no_python:
        raise LaunchError("gradviz torchrun runs Python: --no-python is not supported")
    script, script_args = parsed.training_script, list(parsed.training_script_args)
    cut = len(argv) - len(script_args) - 1
    if cut < 0 or argv[cut] != script:
        raise LaunchError(f"could not find the script `{script}` among the arguments")
    # -m/--module is torchrun's: the ranks get it from rank_worker's own -m instead
    options = [a for a in argv[:cut] if a not in ("-m", "--module")]
    return options, script, script_args, bool(parsed.module)


def torchrun_command(torchrun_args, script, script_args, as_module=False):
    """The launcher's command: each rank runs ``python -u -m gradviz.distributed.rank_worker [-m] SCRIPT ARGS``."""
    return [sys.executable, "-m", "torch.distributed.run", *torchrun_args, "-m", "gradviz.distributed.rank_worker",
            *(["-m"] if as_module else []), script, *script_args]


def job_config(out_dir, engine, check_backward, exact_memory, script, schedule=None):
    config = new_config(out_dir, engine=engine, check_backward=check_backward, exact_memory=exact_memory,
                        script=script, schedule=schedule)
    clear_old_documents(config)
    return config


def clear_old_documents(config):
    """Earlier runs' process documents in the folder go (ours only: ``*-pid<n>.json``); this run's are new."""
    folder = config["folder"]
    os.makedirs(folder, exist_ok=True)
    for name in os.listdir(folder):
        if name.endswith(".json") and "-pid" in name:
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(folder, name))


def forget_earlier_documents(folder):
    """A run that started no process: the earlier runs' process documents in ``folder`` go, and the folder if
    it is left empty (as after a run whose watch was armed)."""
    clear_old_documents({"folder": folder})
    _remove_empty(folder)


def run_job(command, config, timeout=None):
    """Run the launcher with the job's settings in its environment; after ``timeout`` seconds it is told to
    stop (SIGTERM: it stops the ranks the same way, and each writes its document). Returns ``(exit code,
    timed out)``."""
    env = child_environment(config)
    # rank_worker must be importable by the ranks: gradviz's folder last, so it changes nothing else's resolution
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], config["gradviz_path"]])
    process = subprocess.Popen(command, env=env)
    timed_out = False
    try:
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    except KeyboardInterrupt:  # Ctrl-C reached the ranks too: let them write, then report
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=GRACE_SECONDS)
        raise
    return process.returncode, timed_out


class ChildTracing:
    """For ``gradviz run``: ``started(tr)`` (given to ``trace_script``) makes the script's children traced;
    ``report(doc)`` after the run gives the document to write: the script's own with its ``process`` section,
    merged with its children's when it started any. ``close()`` undoes everything (idempotent)."""

    def __init__(self, out_dir, engine, check_backward, exact_memory, script, schedule=None):
        """``out_dir`` None: the children's documents go to a temporary folder, removed after the merge."""
        self.config = None
        self._temporary = None
        if out_dir is None:
            import tempfile

            out_dir = self._temporary = tempfile.mkdtemp(prefix="gradviz-children-")
        self.args = (out_dir, engine, check_backward, exact_memory, script, schedule)
        self._watch = None
        self.children = None

    def started(self, tr):
        from .parent import watch

        out_dir, engine, check_backward, exact_memory, script, schedule = self.args
        try:
            self.config = job_config(out_dir, engine, check_backward, exact_memory, script, schedule)
        except OSError:  # the output folder cannot be made: the report says so later; children write elsewhere
            import tempfile

            self._temporary = tempfile.mkdtemp(prefix="gradviz-children-")
            self.config = job_config(self._temporary, engine, check_backward, exact_memory, script, schedule)
        self._watch = watch(self.config, tr)
        self.children = self._watch.__enter__()

    def close(self):
        if self._watch is not None:
            watch, self._watch = self._watch, None
            watch.__exit__(None, None, None)

    def report(self, doc):
        try:
            return self._report(doc)
        finally:
            if self._temporary is not None:
                import shutil

                shutil.rmtree(self._temporary, ignore_errors=True)

    def _report(self, doc):
        from ..document.process import process_section
        from .merge import load_documents, merge

        self.close()
        status = doc.get("status") or {}
        doc["process"] = process_section("main", status.get("ending", "finished"),
                                         run_id=self.config["run_id"] if self.config else None)
        if self.config is None:
            return doc
        processes, notes = load_documents(self.config)
        children = self.children
        if not (processes or children.processes or children.subprocesses):
            _remove_empty(self.config["folder"])
            return doc
        merged = merge(doc, processes, children.processes, children.subprocesses)
        for note in notes:
            merged.setdefault("internal_errors", []).append({"where": PROCESSES, "type": "UnreadableDocument",
                                                            "message": note})
        return merged


def _remove_empty(folder):
    with contextlib.suppress(OSError):
        os.rmdir(folder)
