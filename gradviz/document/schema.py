"""``load_trace``: read a trace document back, checking it field by field (never pickle, never eval).

The schema is data: each record kind maps field names to a type. The first field that does not fit raises
``TraceFormatError`` with a one-line message naming it, e.g. ``nodes[3].op: expected a string``. Whatever the
file holds (binary, NaN/Infinity tokens, nesting thousands of levels deep, numbers of a million digits), the
answer is that one-line error, never another exception.
"""

import json
import re

from .model import FORMAT, VERSION, TraceDocument
from .text import terminal_safe
from .vocabulary import SEVERITIES


class TraceFormatError(ValueError):
    """A file that is not a valid gradviz trace document; the message names the first bad field."""


# Types: "int", "str", "bool", "num" (a number, or "nan"/"inf"/"-inf"), "obj" (any object), "any";
# a leading "?" allows null; [T] is a list of T; (T, U) a list of exactly a T and a U; {T} an object of T, {#T}
# one keyed by ids ("12"); a dict is a nested record. Keys ending in "?" are optional.
LOCATION = {"file": "str", "line": "int", "text": "str", "function?": "?str"}
THREAD = {"name": "str", "ident": "?int"}
SAVED = {"variable": "?int", "kind": "str", "index": "int", "shape": ["int"], "bytes": "int", "version": "int"}
VARIABLE = {
    "id": "int", "name": "?str", "shape": ["int"], "dtype": "str", "bytes": "int", "requires_grad": "bool",
    "requires_grad_final": "?bool", "is_leaf": "bool", "is_parameter": "bool", "origin": "str", "node": "?int",
    "accumulator": "?int",
    "source": "?int", "volatile": "bool", "grad_mode": "bool", "module": ["str"], "location": "?loc",
    "graph": "?int", "op?": "?str", "inputs?": "?[int]", "iteration?": "int", "device?": "?str",
}
NODE = {
    "id": "int", "op": "str", "custom": "bool", "class_name": "str", "inputs": [("?int", "int")],
    "input_variables": ["?int"], "outputs": ["int"], "variable": "?int", "shape": ["int"], "dtype": "str",
    "saved": [SAVED], "meta": "obj", "module": ["str"], "location": "?loc", "graph": "?int", "freed_by": "?int",
    "nonfinite": "?str", "external?": "bool", "iteration?": "int",
}
GRAPH = {
    "id": "int", "structure": "?int", "iteration": "int", "nodes": ["int"], "roots": ["int"], "saved_bytes": "int",
    "output_bytes": "int", "freed_by": "?int", "alive_at_end": "bool", "full": "bool",
    "freed_at_iteration?": "?int", "backwarded?": "bool", "external_inputs?": [["int"]], "thread?": "?thread",
    "elided?": {"nodes": "int"},
}
STRUCTURE = {"id": "int", "signature": "str", "count": "int", "first_graph": "int", "last_graph": "int",
             "iterations": ["int"], "node_count": "int"}
ERROR = {"type": "str", "message": "str", "code": "?str"}
BACKWARD = {
    "id": "int", "iteration": "int", "roots": ["int"], "root_nodes": ["?int"], "retain_graph": "bool",
    "seq": "int", "kind": "str", "location": "?loc", "visited": ["int"], "grad_norms": "{#num}",
    "leaf_grad_norms": "{#num}",
    "gradient_from": "?int", "error": "?error", "started?": "bool", "graphs?": ["int"], "freed_nodes?": "int",
    "thread?": "?thread", "elided_visits?": "int",
}
EVENT = {"id": "int", "seq": "int", "kind": "str", "location": "?loc", "iteration": "int"}
EVENT_FIELDS = {
    "inplace": {"variable": "int", "op": "?str", "old_version": "int", "new_version": "int", "node": "?int",
                "saved_by": ["int"], "silent_saved_by?": ["int"], "silent_backward?": "?int",
                "silent_backward_location?": "?loc"},
    "numpy_write": {"variable": "int", "saved_by": ["int"], "backward": "?int", "backward_location?": "?loc"},
    "grad_read": {"variable": "int", "was_none": "bool", "is_leaf": "bool", "retains_grad": "bool"},
    "grad_write": {"variable": "int"},
    "hook": {"variable": "?int", "event": "str", "hook_name": "?str", "retain_grad": "bool"},
    "detach": {"source": "int", "result": "?int", "how": "str"},
    "optimizer": {"event": "str", "optimizer": "str", "parameters": ["int"]},
}
DIAGNOSTIC = {
    "code": "str", "severity": "str", "message": "str", "id?": "int", "hint?": "?str", "location?": "?loc",
    "nodes?": ["int"], "variables?": ["int"], "links?": ["int"], "count?": "int", "related?": ["obj"],
    "details?": "?obj",
}
POINT = {"iteration": "int", "retained_bytes": "int", "graphs_alive": "int"}
MEMORY = {"peak_retained_bytes": "int", "final_retained_bytes": "int", "series": [POINT], "graphs": ["obj"]}
STATUS = {"completed": "bool", "exception": "?obj"}
ENGINE = {"name": "str", "version": "?str", "devices": ["str"], "memory?": "str", "engines?": ["obj"]}
BACKWARD_CHECK = {
    "id": "int", "class_name": "str", "node": "?int", "location": "?loc", "backward_location": "?loc",
    "signature": ["str"], "status": "str", "reason": "?str", "dtype": "?str", "checked_inputs": ["int"],
    "input": "?int", "input_name": "?str", "relative_error": "?num", "backward_value": "?num",
    "numerical_value": "?num",
}
BACKWARD_CHECKS = {"enabled": "bool", "budget": "int", "repeats": "int", "over_budget": "int",
                   "checks": [BACKWARD_CHECK]}
THREADS = {"observed": ["thread"], "unobserved": ["thread"], "note?": "str"}
UNSEEN = {"kind": "str", "what": "str", "count": "int", "how?": "?str", "location?": "?loc", "advice?": "?str"}
FULL_RANGE = {"first": "int", "last": "int", "why": "str"}
GRAD_NORMS = {"parameter": "?str", "last": "num", "min": "num", "max": "num", "iteration": "int"}
LIGHT = {"nonfinite_loss": "?obj", "nonfinite_grad": "?obj", "growth": "?obj", "graphs_alive": "int",
         "retained_bytes": "int", "grad_norms": [GRAD_NORMS]}
SCHEDULE = {"mode": "str", "full_steps": "int", "trace_steps": "?[int]", "full": [FULL_RANGE],
            "light_iterations": "int", "light?": LIGHT}
PROCESS = {"rank": "?int", "local_rank": "?int", "world_size": "?int", "pid": "int", "parent_pid": "?int",
           "how": "str", "status": "str", "stopped_at?": "?loc", "rpc?": "bool"}
JOB = {"how": "str", "world_size": "?int", "processes": ["obj"], "structures": ["obj"], "first_divergence": "?obj",
       "verdict?": "?obj",
       "stopped": ["obj"], "rpc?": ["?int"]}
DDP_MODULE = {"path": "str", "find_unused_parameters": "bool", "static_graph": "bool", "parameters": ["str"],
              "owners": "{str}", "call_sites": "{?loc}"}
DDP_FORWARD = {"module": "str", "forward": "int", "iteration": "int", "synced": "bool", "location": "?loc",
               "backward": "bool", "unused": ["str"], "skipped": ["str"]}
DDP_STEP = {"step": "int", "iteration": "int", "location": "?loc", "optimizer": "str", "micro": ["obj"],
            "gradients": "{[num]}"}
DDP = {"process": "?obj", "modules": [DDP_MODULE], "forwards": [DDP_FORWARD], "forward_count": "int",
       "backward_count": "int", "steps": [DDP_STEP], "step_count": "int", "unused": ["obj"], "accumulation": "obj",
       "errors": ["obj"]}
MODE_RUN = {"training": "bool", "grad": "bool", "backward": "bool", "count": "int", "order": "int", "end": "int",
            "first": {"iteration": "int", "location": "?loc"}, "last_iteration": "int"}
MODE_MODULE = {"module": "str", "class": "str", "dropped_runs": "int", "runs": [MODE_RUN]}
MODE_SWITCH = {"module": "str", "class": "str", "mode": "str", "touches": ["str"], "order": "int",
               "iteration": "int", "location": "?loc"}
FUNCTIONAL_DROPOUT = {"function": "str", "module": "str", "class": "str", "grad": "bool", "count": "int",
                      "order": "int", "iteration": "int", "last_iteration": "int", "location": "?loc",
                      "caller": "?loc"}
OPTIMIZER_BUILT = {"class": "str", "location": "?loc", "iteration": "int", "order": "int", "last_variable": "int",
                   "param_groups": [["int"]]}
ZERO_GRAD_BEFORE_STEP = {"optimizer": "str", "zero_grad_of": "str", "location": "?loc", "step_location": "?loc",
                         "iteration": "int", "last_iteration": "int", "count": "int", "order": "int"}
CLIP_ORDER = {"function": "str", "location": "?loc", "iteration": "int", "last_iteration": "int", "count": "int",
              "after_step": "bool", "step_location": "?loc", "order": "int"}
TRAINING = {"modules": [MODE_MODULE], "switches": [MODE_SWITCH], "switch_count": "int",
            "functional_dropout?": [FUNCTIONAL_DROPOUT], "optimizers?": [OPTIMIZER_BUILT], "optimizer_count?": "int",
            "zero_grad_before_step?": [ZERO_GRAD_BEFORE_STEP], "clip_order?": [CLIP_ORDER]}
DOCUMENT = {
    "format": "str", "version": "int", "gradviz_version": "str", "script": "?str", "status": STATUS,
    "modules": "{str}",
    "variables": [VARIABLE], "nodes": [NODE], "graphs": [GRAPH], "structures": [STRUCTURE],
    "backwards": [BACKWARD], "events": [EVENT], "diagnostics": [DIAGNOSTIC], "memory": MEMORY, "dropped": "obj",
    "iterations?": "int", "window?": "int", "event_summary?": ["obj"], "first_nonfinite?": "?obj",
    "internal_errors?": ["obj"], "engine?": ENGINE, "backward_checks?": BACKWARD_CHECKS, "threads?": THREADS,
    "unseen?": [UNSEEN], "schedule?": SCHEDULE, "process?": PROCESS, "job?": JOB, "ranks?": ["obj"],
    "ddp?": DDP, "training?": TRAINING,
}
# Free-form values ("obj", "any": op metadata, diagnostic details…) may nest this deep; the schema's own records
# nest a few levels. Deeper is refused, so no reader (or a re-save) ever recurses past Python's limit.
MAX_DEPTH = 64
_NAMES = {"int": "an integer", "str": "a string", "bool": "true or false", "num": "a number", "obj": "an object",
          "loc": "a location object", "error": "an error object", "thread": "a thread object"}


def _describe(spec):
    if isinstance(spec, list):
        return "a list"
    if isinstance(spec, dict):
        return "an object"
    if spec.startswith("?"):
        return _describe(spec[1:]) + " or null"
    if spec.startswith("{"):
        return "an object"
    if spec.startswith("["):
        return "a list"
    return _NAMES[spec]


def _fail(path, message):
    raise TraceFormatError(f"{path}: {message}")


def _check(value, spec, path):
    if isinstance(spec, tuple):
        if not isinstance(value, list) or len(value) != len(spec):
            _fail(path, f"expected a list of {len(spec)} items")
        for i, (item, item_spec) in enumerate(zip(value, spec)):
            _check(item, item_spec, f"{path}[{i}]")
        return
    if isinstance(spec, list):
        if not isinstance(value, list):
            _fail(path, "expected a list")
        for i, item in enumerate(value):
            _check(item, spec[0], f"{path}[{i}]")
        return
    if isinstance(spec, dict):
        _check_record(value, spec, path)
        return
    if spec.startswith("?"):
        if value is None:
            return
        spec = spec[1:]
    if spec.startswith("["):
        _check(value, [spec[1:-1]], path)
    elif spec.startswith("{"):
        if not isinstance(value, dict):
            _fail(path, "expected an object")
        keyed_by_id = spec.startswith("{#")
        for key, item in value.items():
            where = f"{path}.{terminal_safe(key)}"  # the key is the file's: shown inert
            if keyed_by_id and not is_id_key(key):
                _fail(where, "expected an id (an integer) as the key")
            _check(item, spec[2 if keyed_by_id else 1:-1], where)
    elif spec == "loc":
        _check_record(value, LOCATION, path, "a location object")
    elif spec == "error":
        _check_record(value, ERROR, path, "an error object")
    elif spec == "thread":
        _check_record(value, THREAD, path, "a thread object")
    elif not _fits(value, spec):
        if spec in ("obj", "any") and isinstance(value, (dict, list)) or spec == "obj" and isinstance(value, dict):
            _fail(path, f"nested more than {MAX_DEPTH} levels deep")
        _fail(path, f"expected {_describe(spec)}")


def _fits(value, spec):
    if spec == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if spec == "str":
        return isinstance(value, str)
    if spec == "bool":
        return isinstance(value, bool)
    if spec == "num":
        return (isinstance(value, (int, float)) and not isinstance(value, bool)) or value in ("nan", "inf", "-inf")
    if spec == "obj":
        return isinstance(value, dict) and _depth_within(value, MAX_DEPTH)
    return _depth_within(value, MAX_DEPTH)


def _depth_within(value, limit):
    """Whether ``value`` nests no deeper than ``limit`` lists/objects (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = item.values()
        elif not isinstance(item, list):
            continue
        if depth > limit:
            return False
        stack.extend((child, depth + 1) for child in item if isinstance(child, (dict, list)))
    return True


def _check_record(value, spec, path, what="an object"):
    if not isinstance(value, dict):
        _fail(path, f"expected {what}")
    prefix = f"{path}." if path else ""
    for key, field_spec in spec.items():
        optional = key.endswith("?")
        name = key[:-1] if optional else key
        if name not in value:
            if optional:
                continue
            _fail(prefix + name, "missing")
        _check(value[name], field_spec, prefix + name)


def is_id_key(key):
    """Whether an object key names an id, as JSON writes integer keys: ``"12"``."""
    return isinstance(key, str) and key.isascii() and key.lstrip("-").isdigit() and len(key) < 20


def validate(doc):
    """Raise TraceFormatError at the first field of ``doc`` that does not fit the version-1 schema."""
    if not isinstance(doc, dict):
        raise TraceFormatError("document: expected a JSON object at the top level")
    if doc.get("format") != FORMAT:
        _fail("format", f'expected "{FORMAT}", got {json.dumps(doc.get("format"))}')
    if doc.get("version") != VERSION:
        _fail("version", f"unsupported version {json.dumps(doc.get('version'))} (this gradviz reads version "
                         f"{VERSION})")
    _check_record(doc, DOCUMENT, "")
    for i, event in enumerate(doc["events"]):
        fields = EVENT_FIELDS.get(event["kind"])
        if fields is not None:
            _check_record(event, fields, f"events[{i}]")
    for i, diag in enumerate(doc["diagnostics"]):
        if diag["severity"] not in SEVERITIES:
            _fail(f"diagnostics[{i}].severity", f"expected one of {', '.join(SEVERITIES)}")


def load_trace(path):
    """Read and validate a trace document written by ``tr.to_json`` or ``gradviz run``; returns a
    ``TraceDocument`` (a dict) that renderers accept like a live trace's ``to_dict()``.

    A file that is not a valid document raises ``TraceFormatError`` with one line naming the problem; a file
    that cannot be opened raises the ``OSError`` (``FileNotFoundError``…) that ``open`` gives."""
    name = terminal_safe(path)  # errors quote the file name: shown inert whatever it holds
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except UnicodeDecodeError:
        raise TraceFormatError(f"{name}: not a text file (expected a gradviz trace in JSON)") from None
    return TraceDocument(parse(text, name))


def parse(text, path="document"):
    """The validated document in JSON ``text``; ``path`` names it in errors."""
    try:
        doc = json.loads(text, parse_constant=_reject_constant)
    except _NonStandardConstant:
        raise TraceFormatError(f"{path}: not strict JSON ({_constant_position(text)}; the format writes "
                               'non-finite numbers as the strings "nan", "inf", "-inf")') from None
    except json.JSONDecodeError as exc:
        raise TraceFormatError(f"{path}: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except RecursionError:
        raise TraceFormatError(f"{path}: nested too deeply to be a trace document (its records nest a few "
                               f"levels, free-form fields at most {MAX_DEPTH})") from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        raise TraceFormatError(f"{path}: not a valid trace in JSON ({str(exc).splitlines()[0]})") from None
    validate(doc)
    return doc


class _NonStandardConstant(Exception):
    pass


def _reject_constant(name):
    raise _NonStandardConstant(name)


# A JSON string, or a bare NaN/Infinity token outside strings: the first match of the second kind is the culprit.
_STRING_OR_CONSTANT = re.compile(r'"(?:[^"\\]|\\.)*"|(-?Infinity|NaN)')


def _constant_position(text):
    for match in _STRING_OR_CONSTANT.finditer(text):
        if match.group(1):
            line = text.count("\n", 0, match.start()) + 1
            column = match.start() - (text.rfind("\n", 0, match.start()) + 1) + 1
            return f"{match.group(1)} at line {line} column {column}"
    return "a NaN or Infinity token"
