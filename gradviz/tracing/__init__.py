"""The tracer: records what the engine does, through its observer interface only, as a JSON-ready document.

``gradviz.trace()`` makes a ``Trace``; ``gradviz.load_trace(path)`` reads a saved document back;
``snapshot(*variables)`` describes an existing graph without a trace. The document's schema is in
docs/trace-format.md.
"""

from ..document import TraceDocument, TraceFormatError, load_trace, validate  # the contract, re-exported
from .recorder import Trace

trace = Trace


def __getattr__(name):
    # ``snapshot`` is loaded on first use: it reads gradviz's own engine, which a trace of PyTorch never imports
    if name == "snapshot":
        from .engine_snapshot import snapshot

        return snapshot
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["trace", "Trace", "load_trace", "snapshot", "TraceFormatError", "TraceDocument", "validate"]
