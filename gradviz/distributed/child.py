"""A ``multiprocessing`` child of a traced run runs its target under a fresh trace and writes its own document.

The hook is ``BaseProcess._bootstrap``, which every start method runs in the child just before the target: for
spawn and forkserver children the bootstrap (``bootstrap/sitecustomize.py``) installs it; a forked child inherits
it from the traced parent (``parent.watch``), together with a copy of the parent's trace, which is detached there
first (its records are the parent's; the child's document holds only what the child did).
"""

import multiprocessing.process as mp_process
import sys
import time

from .last_words import LastWords

_state = {"config": None, "inherited": None, "installed": False}


def install(config, inherited_trace=None):
    """Trace every ``multiprocessing`` child started from now on (in this process or, by fork, from it)."""
    _state["config"] = config
    _state["inherited"] = inherited_trace
    if not _state["installed"]:
        _state["installed"] = True
        original = mp_process.BaseProcess._bootstrap

        def _bootstrap(self, *args, **kwargs):
            if _state["config"] is not None:
                _prepare(self)
            return original(self, *args, **kwargs)

        _bootstrap.gradviz_original = original
        mp_process.BaseProcess._bootstrap = _bootstrap


def uninstall():
    """Back to plain ``multiprocessing`` (the traced run is over)."""
    _state["config"] = _state["inherited"] = None
    current = mp_process.BaseProcess._bootstrap
    if _state["installed"] and hasattr(current, "gradviz_original"):
        mp_process.BaseProcess._bootstrap = current.gradviz_original
    _state["installed"] = False


DATALOADER_WORKER = "torch.utils.data.DataLoader worker"


def how_started(process):
    """``torch.multiprocessing.spawn`` when the target is its wrapper (then the index it passes is the rank by
    convention), a DataLoader worker, else ``multiprocessing.Process.start (<method>)``; and that index or None."""
    target = getattr(process, "_target", None)
    if getattr(target, "__module__", "") == "torch.utils.data._utils.worker":
        return DATALOADER_WORKER, None
    if (getattr(target, "__module__", ""), getattr(target, "__name__", "")) == ("torch.multiprocessing.spawn", "_wrap"):
        args = getattr(process, "_args", ())
        return "torch.multiprocessing.spawn", (args[1] if len(args) > 1 and isinstance(args[1], int) else None)
    method = getattr(process, "_start_method", None) or _start_method()
    return f"multiprocessing.Process.start ({method})", None


def _start_method():
    import multiprocessing

    return multiprocessing.get_start_method(allow_none=True) or multiprocessing.get_context().get_start_method()


def _prepare(process):
    """In the child, just before the target runs: leave the parent's trace behind and wrap ``run`` (an instance
    attribute, so a subclass's own ``run`` is wrapped too)."""
    how, index = how_started(process)
    if how == DATALOADER_WORKER:  # it loads data: left untraced (a forked one steps aside), and listed unseen
        return
    config = _state["config"]
    inherited, _state["inherited"] = _state["inherited"], None
    if inherited is not None:
        _leave(inherited)
    run = process.run
    process.run = lambda: _traced_run(run, config, how, index, process.name)


def _leave(trace):
    """A forked child's copy of the parent's trace stops reporting here, without finishing: its records are
    the parent's, and the parent writes them."""
    for adapter in trace.adapters:
        try:
            adapter.detach()
        except Exception:  # the copy is the parent's business; the child's own trace is what matters
            pass
    trace.active = False


def _traced_run(run, config, how, index, name):
    import gradviz

    from .record import document_when_killed, save
    from .rpc import RpcUse, note_unseen

    tr = gradviz.trace(engine=config.get("engine", "auto"), check_backward=config.get("check_backward", True),
                       exact_memory=config.get("exact_memory", False), **(config.get("schedule") or {}))
    last = LastWords()
    rpc = RpcUse().start()
    tr.start()
    install(config, inherited_trace=tr)  # a grandchild forked from this child leaves this trace behind in turn
    last.arm(lambda signal_name, where, when, sender: save(
        document_when_killed(tr), config, how, "killed", 128 + 15, stopped_at=where, signal_name=signal_name,
        signal_sender=sender, index=index, rank=index, rpc=rpc.used, ended_at=when))
    ending, code, error, ended_at = "finished", 0, None, None
    try:
        try:
            run()
        finally:
            ended_at = time.time()  # before the document is built: a job orders its processes' failures by it
    except SystemExit as exc:
        ending, code = "exit", exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if code and isinstance(exc.__context__, Exception):  # mp.spawn's wrapper turns the target's error into
            ending, error = "exception", exc.__context__      # exit(1): the error is the one to report
        raise
    except Exception as exc:
        ending, code, error = "exception", 1, exc
        # as multiprocessing prints it, without gradviz's frames; the exit status is the same (1)
        from ..cli.runner import user_traceback

        sys.stderr.write(f"Process {name}:\n{user_traceback(exc)}")
        sys.stderr.flush()
        raise SystemExit(1) from None
    except BaseException as exc:  # KeyboardInterrupt and the like: multiprocessing's own handling
        ending, code, error = "exception", 1, exc
        raise
    finally:
        last.ending()  # the target is over: a SIGTERM now waits for the document below
        try:
            tr.__exit__(type(error) if error is not None else None, error,
                        error.__traceback__ if error is not None else None)
            doc = tr.to_dict()
            used_rpc = rpc.stop()
            if used_rpc:
                note_unseen(doc)
            save(doc, config, how, ending, code, index=index, rank=index, rpc=used_rpc, ended_at=ended_at)
        finally:
            last.done()
