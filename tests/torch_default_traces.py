"""A sample's trace on real PyTorch in the default mode, made once per test process: test_torch_parity compares it
with gradviz's engine, test_torch_exact_memory with the exact-memory mode, and a sample takes seconds to trace.
Only what those tests read is kept (a whole document of every sample would stay in memory for the session)."""

import warnings

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


def default_torch_trace(path, source):
    key = (str(path), source)
    if key not in _traces:
        doc = trace_source(path, source, "torch")
        _traces[key] = {k: doc[k] for k in _KEPT}
    return _traces[key]
