"""The tracer: records what the engine does, through its observer interface only, as a JSON-ready document.

``gradviz.trace()`` makes a ``Trace``; ``gradviz.load_trace(path)`` reads a saved document back;
``snapshot(*variables)`` describes an existing graph without a trace. The document's schema is in
docs/trace-format.md.
"""

from ..document import TraceDocument, TraceFormatError, load_trace, validate  # the contract, re-exported
from .recorder import Trace
from .snapshot import snapshot

trace = Trace

__all__ = ["trace", "Trace", "load_trace", "snapshot", "TraceFormatError", "TraceDocument", "validate"]
