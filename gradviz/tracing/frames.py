"""Where in the *user's* code something happened, and what the user called an object there.

A location is the first frame outside the gradviz package, the standard library and installed packages (torch's
folder included: adapters/torch/frames.py adds it and walks with ``is_internal`` too). Walking
a few frames per op is cheap (whether a code object is internal is decided once per code object); what is not
cheap is formatting, so each (code object, line) becomes one shared ``Location``, made once, whose source text is
read only when a document is built.
"""

import linecache
import os
import sys
import sysconfig
import tempfile

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
# The standard library and installed packages (torch, numpy) are not the user's code either: a parameter
# deep-copied by ``copy.deepcopy`` is placed at the user's line that made the copy, not in copy.py.
_LIBRARY_DIRS = tuple(sorted({os.path.abspath(p) + os.sep for key in ("stdlib", "platstdlib", "purelib", "platlib")
                              if (p := sysconfig.get_paths().get(key))}))
# Both caches are keyed by id(code) and hold the code object, so an id is never reused while cached: code objects
# compare equal across files (co_filename is not part of equality), so keying on the object itself would place
# b.py's ops at an identical a.py's lines; an int key is also cheaper to hash than a code object.
_internal_dirs = (_PACKAGE_DIR,) + _LIBRARY_DIRS  # code under these folders is not the user's (add_internal_dir)
_internal = {}  # id(code) -> True when it is gradviz's own, the standard library's or an installed package's
_held = {}  # id(code) -> code, keeping every cached id's code object alive
_locations = {}  # id(code) -> {line: Location}
# id(code) -> {f_lasti: Location}: reading f_lineno scans the line table, an instruction offset maps to one line
_by_offset = {}


class Location:
    """File, line and function of a user frame; ``text`` (the stripped source line) is looked up on first use,
    so the hot path never touches ``linecache``. One instance per (code object, line): compared by identity."""

    __slots__ = ("file", "line", "function", "_text")

    def __init__(self, file, line, function, text=None):
        self.file = file
        self.line = line
        self.function = function
        self._text = text

    @property
    def text(self):
        if self._text is None:
            self._text = linecache.getline(self.file, self.line).strip() if self.line else ""
        return self._text

    def as_dict(self):
        return {"file": self.file, "line": self.line, "text": self.text, "function": self.function}

    def __repr__(self):
        return f"Location({self.file!r}, {self.line}, {self.function!r})"


def is_internal(code):
    """Whether ``code`` is not the user's: gradviz's own, the standard library's, an installed package's (torch
    too, wherever it lives: ``add_internal_dir``), the import machinery's, torch.fx's generated code or the code
    torch.compile's inductor writes to its cache folder. Decided once per code object (the path check is a few µs,
    and the watches that walk frames on every iteration meet the same code each time); the one rule both engines'
    adapters place facts by. The frame walks read ``_internal`` inline and call this on a miss only."""
    flag = _internal.get(id(code))
    if flag is not None:
        return flag
    filename = code.co_filename
    if filename[:1] == "<":  # "<string>", "<stdin>" are the user's
        internal = filename.startswith("<frozen ") or filename.startswith("<eval_with_key>")
    else:
        path = os.path.abspath(filename)
        internal = path.startswith(_internal_dirs) or _inductor_generated(path)
    _held[id(code)] = code
    _internal[id(code)] = internal
    return internal


_is_internal = is_internal  # the name gradviz's adapter imports


_INDUCTOR_DEFAULT = []  # the default folder's prefix, <temp dir>/torchinductor_ (found on first use)


def _inductor_generated(path):
    """Whether ``path`` is a file torch.compile's inductor generated (its wrapper and kernel modules, loaded from
    its cache folder): torch's code, however it reached /tmp. The folder is TORCHINDUCTOR_CACHE_DIR (inductor sets
    it when it first writes) or ``<temp dir>/torchinductor_<user>``; read as text, so torch is never imported."""
    chosen = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if chosen and path.startswith(os.path.abspath(chosen) + os.sep):
        return True
    if not _INDUCTOR_DEFAULT:
        _INDUCTOR_DEFAULT.append(os.path.join(os.path.abspath(tempfile.gettempdir()), "torchinductor_"))
    return path.startswith(_INDUCTOR_DEFAULT[0])


def add_internal_dir(path):
    """Code under folder ``path`` is internal from now on (torch's package folder, once torch is imported: it may
    be a source checkout outside the installed packages)."""
    global _internal_dirs
    path = os.path.abspath(path) + os.sep
    if path not in _internal_dirs:
        _internal_dirs = _internal_dirs + (path,)
        _internal.clear()  # decided again, under the new folders


def user_frame(depth=2):
    """The innermost frame outside gradviz, starting ``depth`` frames above the caller (None if there is none)."""
    try:
        f = sys._getframe(depth)
    except ValueError:
        return None
    internal = _internal
    while f is not None:
        code = f.f_code
        flag = internal.get(id(code))
        if flag is None:
            flag = is_internal(code)
        if not flag:
            return f
        f = f.f_back
    return None


def location_of(frame):
    if frame is None:
        return None
    code = frame.f_code
    if frame.f_trace is None:  # no trace function (it may set f_lineno): the line follows from the instruction
        by_offset = _by_offset.get(id(code))
        if by_offset is not None:
            loc = by_offset.get(frame.f_lasti)
            if loc is not None:
                return loc
        else:
            _held[id(code)] = code
            by_offset = _by_offset.setdefault(id(code), {})
        loc = by_offset[frame.f_lasti] = location_at(code, frame.f_lineno)
        return loc
    return location_at(code, frame.f_lineno)


def location_at(code, line):
    lines = _locations.get(id(code))
    if lines is None:  # setdefault: two threads making the first Location of a line share the same one
        _held[id(code)] = code
        lines = _locations.setdefault(id(code), {})
    loc = lines.get(line)
    if loc is None:
        loc = lines.setdefault(line, Location(code.co_filename, line or 0, code.co_name))
    return loc


_CO_OPTIMIZED = 0x1
_SNAPSHOT_LOCALS = sys.version_info < (3, 13)  # before PEP 667, a function's f_locals is a cached dict copy


def _locals(frame):
    """A function frame's locals as a list of (name, value), without leaving a copy that keeps them alive.

    Before Python 3.13, reading ``f_locals`` of a function frame fills a dict cached on the frame with strong
    references to every local; it stays until the frame ends, so a Variable the user deletes (or rebinds in a
    loop) would stay alive because the tracer looked. CPython refills that cache before every use (``locals()``,
    debuggers' trace functions), so emptying it after reading is invisible to everyone else."""
    scope = frame.f_locals
    items = list(scope.items())
    if _SNAPSHOT_LOCALS and frame.f_code.co_flags & _CO_OPTIMIZED and type(scope) is dict:
        scope.clear()
    return items


def name_in_frame(frame, obj):
    """The name a user frame binds to ``obj`` (locals first, then globals), or None. Identity, never ==."""
    if frame is None:
        return None
    for items in (_locals(frame), frame.f_globals.items()):
        fallback = None
        for key, value in items:
            if value is obj:
                if not key.startswith("_"):
                    return key
                fallback = fallback or key
        if fallback:
            return fallback
    return None


def name_in_frames(frame, obj, depth=4):
    """Like ``name_in_frame`` but looking outwards a few frames, ignoring ``self``: a module is named by the
    code that calls it, not by its own methods."""
    while frame is not None and depth > 0:
        name = name_in_frame(frame, obj)
        if name is not None and name != "self":
            return name
        frame = frame.f_back
        depth -= 1
    return None


def names_in_frame(frame, kind):
    """``{id(obj): name}`` for every object of type ``kind`` bound in the frame (locals win over globals)."""
    found = {}
    if frame is None:
        return found
    scope = frame.f_globals
    for key, value in scope.items():
        if isinstance(value, kind) and not key.startswith("__"):
            found[id(value)] = key
    if frame.f_code.co_flags & _CO_OPTIMIZED:
        items = _locals(frame)
    else:  # module level: its locals are usually its globals, already read
        local = frame.f_locals
        items = () if local is scope else local.items()
    for key, value in items:
        if isinstance(value, kind) and not key.startswith("__"):
            found[id(value)] = key
    return found
