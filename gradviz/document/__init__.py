"""The trace document's contract, in one place: what producers (the tracer, engine adapters) write and what
consumers (diagnostics, rendering, the CLI) read. docs/trace-format.md describes the format.

- ``model``: ``FORMAT``, ``VERSION`` and ``TraceDocument`` (the dict a trace's ``to_dict()`` and ``load_trace``
  give), ``write_json``;
- ``schema``: ``validate``, ``load_trace``, ``parse`` and ``TraceFormatError`` (one line naming the first bad
  field);
- ``vocabulary``: variable origins, severities and their order, exception -> diagnostic code, op names
  normalised across engines (PyTorch's ``MulBackward0`` is ``MulBackward``);
- ``index``: ``DocIndex``, the one read model every rule and renderer builds its lookups from;
- ``text``: ``terminal_safe``, how a document's strings (names, paths, messages) are shown on a terminal.

It imports no engine, no tracer and no renderer: everything else may import it.
"""

from .index import DocIndex
from .model import FORMAT, VERSION, TraceDocument, check_format, write_json
from .schema import TraceFormatError, load_trace, parse, validate
from .text import terminal_safe
from .vocabulary import (
    ACCUMULATE_GRAD,
    CUT_ORIGINS,
    ERROR_CODES,
    ERROR_MESSAGES,
    ORIGINS,
    RESET_OPS,
    SEVERITIES,
    error_code,
    is_accumulate_grad,
    is_reset_op,
    normalise_op,
    op_name,
    severity_rank,
)

__all__ = ["FORMAT", "VERSION", "TraceDocument", "write_json", "check_format", "TraceFormatError", "load_trace",
           "parse", "validate", "DocIndex", "ORIGINS", "CUT_ORIGINS", "SEVERITIES", "severity_rank", "ERROR_CODES",
           "ERROR_MESSAGES", "error_code", "ACCUMULATE_GRAD", "RESET_OPS", "normalise_op", "op_name",
           "is_accumulate_grad", "is_reset_op", "terminal_safe"]
