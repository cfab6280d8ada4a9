"""Running a script under ``gradviz.trace()`` as its ``__main__``, the way `gradviz run` does, and a sample's full
trace on PyTorch made once per test process: test_torch_parity compares it with gradviz's engine,
test_torch_exact_memory with the exact-memory mode, test_light_sees_everything with light iterations, and a sample
takes seconds to trace. tests/conftest.py sends a sample's three tests to one xdist worker, so the trace is made
once in the suite. Only what those tests read is kept (a whole document of every sample would stay in memory for
the session)."""

import contextlib
import io
import runpy
import sys
import warnings
from pathlib import Path

import gradviz

_KEPT = ("engine", "internal_errors", "diagnostics")
_traces = {}


def trace_source(path, source, engine, **options):
    """``source`` run as ``path``'s ``__main__`` under ``gradviz.trace(engine=...)``; an exception ends the block
    and is recorded, as `gradviz run` does."""
    code = compile(source, str(path), "exec")
    tr = gradviz.trace(engine=engine, **options)
    scope = {"__name__": "__main__", "__file__": str(path)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            with tr:
                exec(code, scope)
        except Exception:
            pass
    return tr.to_dict()


def traced(path, engine, source=None, **options):
    """The script at ``path`` run as ``__main__`` under ``gradviz.trace(engine=..., **options)`` (its argv, its
    folder first on sys.path, its output swallowed); its document. An exception or exit ends the block and is
    recorded, as `gradviz run` does. On gradviz's engine the script's ``import torch`` resolves to gradviz
    (``gradviz run --torch``). With ``source`` that program runs as ``path``, compiled and run in a namespace
    that lives until the trace has stopped (as test_torch_parity always ran it, and as `gradviz run` keeps a
    script's globals); without, ``runpy.run_path`` runs the file."""
    from gradviz.cli.torch_shim import TorchShim

    old_argv, old_path = sys.argv, list(sys.path)
    sys.argv = [str(path)]
    sys.path.insert(0, str(Path(path).parent))
    scope = {"__name__": "__main__", "__file__": str(path)}
    tr = gradviz.trace(engine=engine, **options)
    with contextlib.ExitStack() as stack:
        if engine == "gradviz":
            stack.enter_context(TorchShim())
        stack.enter_context(contextlib.redirect_stdout(io.StringIO()))
        stack.enter_context(warnings.catch_warnings())
        warnings.simplefilter("ignore")
        try:
            with tr:
                if source is None:
                    runpy.run_path(str(path), run_name="__main__")
                else:
                    exec(compile(source, str(path), "exec"), scope)
        except (Exception, SystemExit):
            pass
        finally:
            sys.argv, sys.path[:] = old_argv, old_path
    return tr.to_dict()


def default_torch_trace(path, source=None):
    """The full trace on PyTorch with every option at its default, made once per process for each (path,
    source): its engine, internal errors and diagnostics. ``source`` is the program run as ``path`` (the file's
    own text when not given; a gradviz sample with its imports pointed at torch). A test comparing another
    trace of the sample with this one makes it with ``traced(path, "torch", source, ...)`` the same way."""
    source = Path(path).read_text() if source is None else source
    key = (str(path), source)
    if key not in _traces:
        doc = traced(path, "torch", source)
        _traces[key] = {k: doc[k] for k in _KEPT}
    return _traces[key]
