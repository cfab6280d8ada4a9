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
    folder first on sys.path, its output swallowed), or ``source`` run in its place; its document. An exception
    or exit ends the block and is recorded, as `gradviz run` does. On gradviz's engine the script's
    ``import torch`` resolves to gradviz (``gradviz run --torch``)."""
    from gradviz.cli.torch_shim import TorchShim

    old_argv, old_path = sys.argv, list(sys.path)
    sys.argv = [str(path)]
    sys.path.insert(0, str(Path(path).parent))
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
                    exec(compile(source, str(path), "exec"), {"__name__": "__main__", "__file__": str(path)})
        except (Exception, SystemExit):
            pass
        finally:
            sys.argv, sys.path[:] = old_argv, old_path
    return tr.to_dict()


def own_text_or(path, source):
    """None when ``source`` is the file's own text (the file is then run as `gradviz run` runs it), else
    ``source``: the same program is run the same way whichever test asks first."""
    return None if source is None or source == Path(path).read_text() else source


def default_torch_trace(path, source=None):
    """The full trace on PyTorch with every option at its default (``traced(path, "torch")``), made once per
    process for each (path, source): its engine, internal errors and diagnostics. ``source`` is the program run
    as ``path`` when it is not the file's own text (a gradviz sample with its imports pointed at torch)."""
    source = own_text_or(path, source)
    key = (str(path), source)
    if key not in _traces:
        doc = traced(path, "torch", source)
        _traces[key] = {k: doc[k] for k in _KEPT}
    return _traces[key]
