"""The document as a Python value: its format name and version, and ``TraceDocument``, the dict that a live
trace's ``to_dict()`` and ``load_trace`` both give, so renderers and diagnostics take either."""

import json
import operator

FORMAT = "gradviz-trace"
VERSION = 1


class TraceDocument(dict):
    """A trace document: a plain dict (JSON types only) that also answers ``to_dict()`` and ``to_json()``, so
    a loaded file and a live trace can be handed to the same renderers."""

    def to_dict(self):
        return self

    def to_json(self, path):
        write_json(self, path)
        return path

    def __repr__(self):
        return (f"<TraceDocument: {len(self.get('nodes', ()))} nodes, {len(self.get('graphs', ()))} graphs, "
                f"{len(self.get('backwards', ()))} backward calls, {len(self.get('diagnostics', ()))} diagnostics>")


def write_json(doc, path):
    """Write ``doc`` as strict JSON (no NaN/Infinity: the format forbids them), compactly, to ``path``."""
    from ..atomic import atomic_open

    # atomic: a failure halfway (full disk, Ctrl-C, a NaN found late) leaves the old file, never a truncated one
    with atomic_open(path, "w", encoding="utf-8") as f:
        write_json_to(f, doc)


_SLICE = 2000  # items of a long top-level list encoded at a time


def write_json_to(f, doc):
    """``doc`` as strict, compact JSON and a newline, into the open text file ``f`` (the same bytes as one
    ``json.dumps``). A caller that must not leave half a file writes into a staged file (``atomic``)."""
    if not isinstance(doc, dict) or not all(isinstance(key, str) for key in doc):
        f.write(_dumps(doc))
        f.write("\n")
        return
    # key by key, and a long list (``nodes``, ``variables``) a slice at a time: one dumps of a long run's
    # document holds its whole text and the encoder's pieces at once, tens of MiB at the run's end, its peak
    f.write("{")
    for number, (key, value) in enumerate(doc.items()):
        f.write(f"{',' if number else ''}{_dumps(key)}:")
        if isinstance(value, list) and len(value) > _SLICE:
            f.write("[")
            for start in range(0, len(value), _SLICE):
                f.write(("," if start else "") + _dumps(value[start:start + _SLICE])[1:-1])
            f.write("]")
        else:
            f.write(_dumps(value))
    f.write("}\n")


def _dumps(value):
    # dumps, not dump: json.dump streams through the pure-Python encoder, dumps uses the C one (~10x)
    return json.dumps(value, allow_nan=False, separators=(",", ":"), default=json_number)


def json_number(value):
    """For ``json.dumps(default=)``: a number JSON has no type for, as the int or float it stands for. A symbolic
    size (torch's SymInt from a compiled region's fake tensors) must not cost the run its report: it goes as its
    text ("s0", "u0"), or as the number that text is; read without asking it for a value, which would add a
    guard to its compilation (and log an error for a data-dependent one). Anything else is refused as ``json``
    refuses it."""
    if type(value).__name__ in ("SymInt", "SymFloat", "SymBool"):
        text = str(value)
        for convert in (int, float):
            try:
                return convert(text)
            except ValueError:
                pass
        return text
    for convert in (operator.index, float):  # numpy's scalars
        try:
            return convert(value)
        except (TypeError, ValueError):
            pass
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def check_format(doc):
    """``doc`` when it says it is a trace document (``"format": "gradviz-trace"``); a one-line ValueError if not.
    Cheap, unlike ``validate``: for documents handed over in memory, which their producer already made right."""
    if doc.get("format") != FORMAT:
        raise ValueError(f'not a gradviz trace document: its "format" field is {doc.get("format")!r}, '
                         f"expected {FORMAT!r}")
    return doc
