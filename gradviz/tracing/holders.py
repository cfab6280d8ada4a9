"""What keeps finished graphs alive: a list (or dict, deque) of the user's that holds their outputs.

``history.append(loss)`` keeps every loss and, through its ``grad_fn``, its whole graph: nothing in the graph
says so (a list is not an op). When the trace stops, the containers the user's frame binds are looked at, and
one holding graph outputs is named, with the one line of the file that adds to it, when there is one
(``history.append(``, ``.extend(``, ``.insert(``, ``+=``, ``[...] =``).
"""

import linecache
import re
from collections import deque

from .frames import Location

SCAN_LIMIT = 10_000  # items looked at per container
MIN_HELD = 2  # graph outputs a container must hold to be named


def graph_holders(scopes, filename, is_graph_output):
    """``[{"name", "count", "location"}]``: the containers bound by name in ``scopes`` (each a list of ``(name,
    value)``: a frame's locals, a module's globals) that hold at least ``MIN_HELD`` values for which
    ``is_graph_output(value)`` is true; ``filename``: the file whose line adds to them."""
    found, seen = [], set()
    for scope in scopes:
        for name, value in scope:
            if name.startswith("__") or id(value) in seen or not isinstance(value, (list, deque, dict)):
                continue
            seen.add(id(value))
            items = value.values() if isinstance(value, dict) else value
            count = 0
            for i, item in enumerate(items):
                if i >= SCAN_LIMIT:
                    break
                if is_graph_output(item):
                    count += 1
            if count >= MIN_HELD:
                found.append({"name": name, "count": count, "location": _line_adding_to(name, filename)})
    return found


def _line_adding_to(name, filename):
    """The Location of the one line of ``filename`` that adds to container ``name``, or None."""
    if not filename or filename.startswith("<"):
        return None
    n = re.escape(name)
    pattern = re.compile(rf"(?<![\w.]){n}\s*(?:\.(?:append|extend|insert|appendleft)\s*\(|\+=|\[[^\]]*\]\s*=[^=])")
    lines = [i for i, text in enumerate(linecache.getlines(filename), start=1)
             if pattern.search(text.split("#", 1)[0])]
    if len(lines) != 1:
        return None
    from .source_match import _function_at

    return Location(filename, lines[0], _function_at(filename, lines[0]))
