"""Run ``train(rank, world_size)`` of DDP scripts on N gloo ranks on CPU, one script after the other in the same
ranks (one process group: starting ranks is the slow part), each traced by ``gradviz.trace(engine="torch")`` and
writing its document to ``OUT/<script name>/rank<r>.json``; used by tests/test_ddp_*.py.

    python tests/ddp_ranks.py OUT NPROCS SCRIPT...

Started in a subprocess by the tests (``torch.multiprocessing.spawn`` wants a ``__main__`` it can re-import). A
rank whose ``train`` raises still writes its document (the exception is in its ``status``); a script that
breaks the process group (a rank raising mid-collective) must come last.
"""

import datetime
import importlib.util
import os
import socket
import sys


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank(rank, world_size, scripts, out, port):
    import torch.distributed as dist

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size, timeout=datetime.timedelta(seconds=60))
    try:
        for script in scripts:
            if not _traced(rank, world_size, script, out):
                break  # the group may be broken: leave, so that the other ranks' waits fail at once
            dist.barrier()
    finally:
        dist.destroy_process_group()


def _traced(rank, world_size, script, out):
    import gradviz

    name = os.path.splitext(os.path.basename(script))[0]
    spec = importlib.util.spec_from_file_location(name, script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    os.makedirs(os.path.join(out, name), exist_ok=True)
    tr = gradviz.trace(engine="torch")
    try:
        with tr:
            module.train(rank, world_size)
        return True
    except Exception as exc:  # kept in the document's status; the other ranks' documents still get written
        print(f"rank {rank}: {type(exc).__name__}: {str(exc).splitlines()[0]}", file=sys.stderr)
        return False
    finally:
        tr.to_json(os.path.join(out, name, f"rank{rank}.json"))


if __name__ == "__main__":
    import torch.multiprocessing as mp

    out, nprocs, scripts = sys.argv[1], int(sys.argv[2]), [os.path.abspath(s) for s in sys.argv[3:]]
    mp.spawn(_rank, args=(nprocs, scripts, out, _free_port()), nprocs=nprocs)
