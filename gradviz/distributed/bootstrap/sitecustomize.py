"""gradviz's child bootstrap: first on the PYTHONPATH of the processes a traced run starts (docs/distributed.md).

In a ``multiprocessing`` child (spawn: ``--multiprocessing-fork`` on its command line; the forkserver's server,
whose forked children inherit what it loaded) it makes the target run under a fresh trace. Any other Python
process is left alone. Then the next ``sitecustomize`` on the path, if any, runs as if this one did not exist.
"""


def _gradviz_child():
    import os
    import sys

    if "GRADVIZ_CHILD_TRACE" not in os.environ:
        return
    argv = getattr(sys, "orig_argv", sys.argv)
    spawned = "--multiprocessing-fork" in argv
    server = any("multiprocessing.forkserver" in arg for arg in argv)
    if not (spawned or server):
        return
    try:
        from gradviz.distributed.config import read
    except ImportError:  # gradviz is not on this interpreter's path: the parent adds its folder
        import json

        path = (json.loads(os.environ["GRADVIZ_CHILD_TRACE"]) or {}).get("gradviz_path")
        if not path:
            return
        sys.path.append(path)
        from gradviz.distributed.config import read
    config = read()
    if config is None:
        return
    from gradviz.distributed import child, last_words

    if spawned:  # the server of a forkserver must stay killable: its children use a plain handler
        last_words.block_early()
    child.install(config)


def _chain():
    """Run the ``sitecustomize`` this one hides (the next one on ``sys.path``), as coverage.py's does."""
    import importlib
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    saved = list(sys.path)
    this = sys.modules.pop("sitecustomize", None)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    try:
        importlib.import_module("sitecustomize")
    except ModuleNotFoundError as exc:
        if exc.name != "sitecustomize":  # the other one's own import failed: as it would without us
            raise
    finally:
        sys.path[:] = saved
        if this is not None:
            sys.modules["sitecustomize"] = this


try:
    _gradviz_child()
except Exception as exc:  # never stop a child from starting: it runs untraced, and the parent reports it unseen
    import sys

    sys.stderr.write(f"gradviz: could not trace this child process: {exc}\n")
_chain()
