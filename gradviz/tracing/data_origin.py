"""Where a tensor that came in with the data was made: the name the user's code binds to it and the line that
bound it (``x = data[step]``, ``for x, y in loader:``), the same way on every engine and in both modes.

A NaN/Inf that an op of the graph received from a value that needs no gradient was not made by the graph: the
line to fix is where the batch was loaded. The graph cannot tell it (the value has no node), so it is read from
the user's frames when the NaN/Inf is found (at the backward that meets it): the innermost user frame that binds
the value, or one sharing its memory (a view the op saved), and the last line of that frame's code storing that
name before the frame's current line (the one at the loop's top when the name is stored later in the loop).
A name that is a function's parameter was made by its caller: the search goes on outwards.
"""

import dis

from .frames import _internal, _is_internal, _locals, location_at

FRAME_LIMIT = 8  # user frames looked at, outwards from the one that met the value
_STORES = {"STORE_NAME", "STORE_FAST", "STORE_GLOBAL", "STORE_DEREF"}
_store_lines = {}  # id(code) -> (code, {name: [lines, in order]})


def data_origin(frame, value, same_memory):
    """``(name, Location)`` of the line that bound ``value`` (or a tensor for which ``same_memory(other)`` is true)
    in the innermost user frame from ``frame`` outwards that holds it; None when no frame does."""
    looked = 0
    while frame is not None and looked < FRAME_LIMIT:
        code = frame.f_code
        internal = _internal.get(id(code))
        if internal is None:
            internal = _is_internal(code)
        if not internal:
            looked += 1
            name = _bound_name(frame, value, same_memory)
            if name is not None and not _is_parameter(code, name):
                line = _store_line(code, name, frame.f_lineno)
                if line is not None:
                    return name, location_at(code, line)
        frame = frame.f_back
    return None


def _bound_name(frame, value, same_memory):
    if frame.f_code.co_flags & 0x1:  # a function: its locals
        items = _locals(frame)
    else:  # module level: its globals
        items = list(frame.f_globals.items())
    fallback = None
    for key, other in items:
        if key.startswith("__"):
            continue
        if other is value:
            return key
        if fallback is None and type(other) is type(value):
            try:
                if same_memory(other):
                    fallback = key
            except Exception:  # a tensor that cannot tell its memory (a meta or sparse one): not this one
                pass
    return fallback


def _is_parameter(code, name):
    count = code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & 0x4) + bool(code.co_flags & 0x8)
    return name in code.co_varnames[:count]


def _store_line(code, name, current):
    """The last line storing ``name`` at or before ``current``, else the last one of all (a loop's body stores it
    below the line that met it, on the iteration before)."""
    cached = _store_lines.get(id(code))
    if cached is None:
        stores = {}
        for ins in dis.get_instructions(code):
            if ins.opname in _STORES and ins.positions is not None and ins.positions.lineno:
                stores.setdefault(ins.argval, []).append(ins.positions.lineno)
        cached = _store_lines[id(code)] = (code, stores)
    lines = cached[1].get(name)
    if not lines:
        return None
    before = [n for n in lines if n <= current]
    return max(before) if before else max(lines)
