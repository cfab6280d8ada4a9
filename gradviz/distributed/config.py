"""What a traced run tells the processes it starts, through one environment variable, and where they write.

The run's folder gets a ``processes/`` subfolder; each traced process writes ``<role>-pid<pid>.json`` there (the
pid makes the name unique among the processes alive together; ``run_id`` tells this run's files from an earlier
run's, which the merge step ignores).
"""

import json
import os
import uuid

from ..document.process import PROCESSES

ENV = "GRADVIZ_CHILD_TRACE"
BOOTSTRAP_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bootstrap")
_PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def new_config(out_dir, engine="auto", check_backward=True, exact_memory=False, script=None, schedule=None):
    """The settings a run hands down: its folder for process documents, its id and the trace options (``schedule``:
    ``gradviz.trace``'s light / full_steps / trace_steps, so every process records the iterations the run would)."""
    return {"run_id": uuid.uuid4().hex[:12], "folder": os.path.join(os.path.abspath(out_dir), PROCESSES),
            "engine": engine, "check_backward": bool(check_backward), "exact_memory": bool(exact_memory),
            "schedule": dict(schedule) if schedule else None,
            "script": script, "parent_pid": os.getpid(), "gradviz_path": _PACKAGE_PARENT}


def read():
    """This process's settings from its environment, or None when no traced run started it."""
    text = os.environ.get(ENV)
    if not text:
        return None
    try:
        config = json.loads(text)
    except ValueError:
        return None
    return config if isinstance(config, dict) and config.get("folder") else None


def child_environment(config, environ=None):
    """``environ`` (default: this process's) with the settings exported and the bootstrap first on PYTHONPATH,
    so that a spawned child loads it before anything else."""
    env = dict(os.environ if environ is None else environ)
    env[ENV] = json.dumps(config)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != BOOTSTRAP_DIR]
    env["PYTHONPATH"] = os.pathsep.join([BOOTSTRAP_DIR, *paths])
    return env


def export(config):
    """Set this process's own environment so that every child it starts inherits the settings; returns a
    function that puts the environment back."""
    before = {key: os.environ.get(key) for key in (ENV, "PYTHONPATH")}
    os.environ.update({key: value for key, value in child_environment(config).items() if key in before})

    def restore():
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return restore


def document_path(config, role, pid=None):
    """``processes/<role>-pid<pid>.json``: one name per live process, never another's."""
    pid = os.getpid() if pid is None else pid
    return os.path.join(config["folder"], f"{role}-pid{pid}.json")
