"""A process's identity in its document: the top-level ``process`` section (docs/trace-format.md "Process"),
written for every run (a plain `gradviz run` as for each process of a job), so it lives with the document."""

import os

PROCESSES = "processes"  # the run folder's subfolder of per-process documents (``file`` names it)


def _env_int(name):
    value = os.environ.get(name)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def process_section(how, status, run_id=None, index=None, rank=None, world_size=None, stopped_at=None, rpc=False):
    """``{"rank", "local_rank", "world_size", "pid", "parent_pid", "how", "status", ...}``. A torchrun rank
    (``how`` "torchrun", or "main": a script torchrun started) takes them from RANK / LOCAL_RANK / WORLD_SIZE;
    another process gets the ``rank`` given (an ``mp.spawn`` index) or null: a child of a rank inherits the
    rank's variables, which are not its own. ``status`` is ``finished``, ``exception``, ``exit`` or ``killed``;
    ``stopped_at`` the user's line the process was on when it was killed; ``rpc`` whether it started
    ``torch.distributed.rpc``."""
    env_rank = _env_int("RANK") if how in ("torchrun", "main") else None
    return {"rank": env_rank if env_rank is not None else rank,
            "local_rank": _env_int("LOCAL_RANK") if env_rank is not None else None,
            "world_size": _env_int("WORLD_SIZE") if env_rank is not None else world_size,
            "pid": os.getpid(), "parent_pid": os.getppid(), "how": how, "status": status,
            "index": index, "run_id": run_id, "stopped_at": stopped_at,
            "rpc": bool(rpc)}
