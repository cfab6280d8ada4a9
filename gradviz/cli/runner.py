"""Run a user's script as ``__main__``, the way ``python script.py`` would, and give control back afterwards.

The script gets a fresh ``__main__`` module, its own ``sys.argv``, its folder first on ``sys.path``, and its
prints go straight through. Whatever it changes among those (and the working folder) is put back in ``finally``.
Its own exception is not gradviz's crash: it is captured with a traceback trimmed to the user's frames, so the
caller can still report on everything that ran up to the failure.
"""

import importlib.util
import linecache
import os
import sys
import time
import tokenize
import traceback
import types
from dataclasses import dataclass

_GRADVIZ_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class ScriptError(Exception):
    """The script cannot be run at all (missing, a folder, not valid Python): a one-line message."""


@dataclass
class RunResult:
    exit_code: int = 0  # what ``python script.py`` would have exited with
    exception: BaseException = None  # the script's own exception, if it raised one
    traceback: str = ""  # that exception's traceback, trimmed to the user's frames
    exit_message: str = ""  # ``sys.exit("text")`` prints its text to stderr, as Python does
    module: types.ModuleType = None  # the script's ``__main__``: its globals stay alive until the caller drops it
    ending: str = "finished"  # "finished", "exit" (sys.exit), "exception" or "interrupted" (KeyboardInterrupt)
    cwd_note: str = ""  # set when the script deleted the folder it started in (we could not go back to it)
    ended_at: float = None  # wall-clock time the script stopped: a job orders its ranks' failures by it


def compile_script(path):
    """Read and compile ``path`` as Python; any reason it can't be run becomes a one-line ``ScriptError``."""
    if not os.path.exists(path):
        if path.startswith("-"):  # gradviz's options go before SCRIPT: this was meant as one
            raise ScriptError(f"no such option `{path}` (gradviz's own options go before SCRIPT; see --help)")
        raise ScriptError(f"no such script `{path}`")
    if os.path.isdir(path):
        raise ScriptError(f"`{path}` is a folder, not a Python script")
    try:
        with tokenize.open(path) as f:
            source = f.read()
    except (OSError, SyntaxError, UnicodeDecodeError) as exc:
        raise ScriptError(f"cannot read `{path}`: {_reason(exc)}") from None
    try:
        return compile(source, path, "exec", dont_inherit=True)
    except SyntaxError as exc:
        where = f"{exc.filename or path}:{exc.lineno}" if exc.lineno else (exc.filename or path)
        raise ScriptError(f"syntax error in `{where}`: {exc.msg}") from None
    except ValueError as exc:  # e.g. "source code string cannot contain null bytes"
        raise ScriptError(f"cannot compile `{path}`: {exc}") from None


@dataclass
class Module:
    """``-m NAME`` resolved as ``python -m NAME`` resolves it: the module's spec (a package's ``__main__``'s) and
    its compiled code; ``path`` is the file that runs."""
    name: str
    spec: object
    code: types.CodeType

    @property
    def path(self):
        return self.spec.origin


def compile_module(name):
    """Find and compile module ``name`` as ``python -m`` does (the working folder first on ``sys.path``, parent
    packages imported, a package runs its ``__main__``); any reason it can't be run is a one-line ``ScriptError``."""
    if not name or name.startswith("."):
        raise ScriptError(f"`{name}` is a relative module name: -m takes an absolute one (`package.module`)")
    saved_path = list(sys.path)
    sys.path[:1] = [os.getcwd()]  # as `python -m` resolves it (gradviz's own script folder is not the user's)
    try:
        spec = _find_spec(name)
        if spec is not None and spec.submodule_search_locations is not None:  # a package: its __main__ runs
            main_spec = _find_spec(f"{name}.__main__")
            if main_spec is None:
                raise ScriptError(f"`{name}` is a package without a `__main__` module: it cannot be run with -m")
            spec = main_spec
    finally:
        sys.path[:] = saved_path
    if spec is None:
        raise ScriptError(f"no module named `{name}` (looked for from `{os.getcwd()}`, as `python -m` does)")
    if spec.loader is None or not hasattr(spec.loader, "get_code") or not spec.origin:
        raise ScriptError(f"`{name}` has no Python code to run with -m")
    try:
        code = spec.loader.get_code(spec.name)
    except SyntaxError as exc:
        where = f"{exc.filename or spec.origin}:{exc.lineno}" if exc.lineno else (exc.filename or spec.origin)
        raise ScriptError(f"syntax error in `{where}`: {exc.msg}") from None
    except (ImportError, OSError, ValueError) as exc:
        raise ScriptError(f"cannot read module `{name}`: {_reason(exc)}") from None
    if code is None:
        raise ScriptError(f"`{name}` has no Python code to run with -m")
    return Module(name, spec, code)


def _find_spec(name):
    """``importlib.util.find_spec``, its failures (a missing parent, a parent that raises on import) one line."""
    try:
        return importlib.util.find_spec(name)
    except ModuleNotFoundError:
        return None
    except Exception as exc:  # the parent package's own __init__ raised
        parent = name.rpartition(".")[0] or name
        reason = (safe_str(exc).splitlines() or [""])[0]
        raise ScriptError(f"-m {name}: importing `{parent}` raised {type(exc).__name__}: {reason}") from None


def run_code(code, path, args=(), spec=None):
    """Execute compiled ``code`` as the ``__main__`` of script ``path`` with ``args``; never raises for the
    script's own errors (they are returned in the ``RunResult``). ``spec``: the module's spec when it runs as
    ``-m`` (``__spec__``, ``__package__``, ``__loader__`` and ``__cached__`` as runpy sets them, and the working
    folder first on ``sys.path`` instead of the script's)."""
    main_module = types.ModuleType("__main__")
    main_module.__file__ = path
    main_module.__builtins__ = __builtins__
    main_module.__loader__ = spec.loader if spec is not None else None
    main_module.__spec__ = spec
    main_module.__package__ = spec.parent if spec is not None else None
    if spec is not None and spec.cached:
        main_module.__cached__ = spec.cached

    saved_main = sys.modules.get("__main__")
    saved_argv = sys.argv
    saved_path = list(sys.path)
    saved_cwd = os.getcwd()
    sys.modules["__main__"] = main_module
    sys.argv = [path, *args]
    script_dir = os.getcwd() if spec is not None else os.path.dirname(os.path.abspath(path))
    if sys.path:
        sys.path[0] = script_dir
    else:
        sys.path.append(script_dir)
    result = RunResult(module=main_module)
    # source lines shown in tracebacks and reports must be this run's, not a cached earlier file of that name
    linecache.cache.pop(path, None)
    try:
        exec(code, main_module.__dict__)
    except SystemExit as exc:
        result.exit_code, result.exit_message = _exit_status(exc.code)
        result.ending = "exit"
    except KeyboardInterrupt as exc:
        result.exception, result.exit_code, result.ending = exc, 130, "interrupted"
        result.traceback = user_traceback(exc)
    except BaseException as exc:  # Exception, and GeneratorExit or the script's own BaseException subclasses
        result.exception, result.exit_code, result.ending = exc, 1, "exception"
        result.traceback = user_traceback(exc)
    finally:
        result.ended_at = time.time()
        result.cwd_note = _go_back_to(saved_cwd)
        sys.path[:] = saved_path
        sys.argv = saved_argv
        if saved_main is None:
            sys.modules.pop("__main__", None)
        else:
            sys.modules["__main__"] = saved_main
    return result


def _go_back_to(cwd):
    """Return to the working folder the script started in. If the script deleted it, go to its nearest
    surviving parent and say so (one line), rather than fail after the script has run."""
    try:
        os.chdir(cwd)
        return ""
    except OSError:
        pass
    parent = cwd
    while True:
        parent = os.path.dirname(parent)
        try:
            os.chdir(parent)
            break
        except OSError:
            if parent == os.path.dirname(parent):
                break
    return f"the script removed the folder it started in, `{cwd}`; gradviz went on from `{parent}`"


def _exit_status(code):
    """What Python's own exit does with ``sys.exit(code)``: None is 0, ints pass, anything else is printed."""
    if code is None:
        return 0, ""
    if isinstance(code, int):
        return code, ""
    return 1, safe_str(code)


def safe_str(obj):
    """``str(obj)``, or ``<exception str() failed>`` as Python's own traceback printer says when it raises."""
    try:
        text = str(obj)
    except Exception:
        return "<exception str() failed>"
    return text if isinstance(text, str) else "<exception str() failed>"


def user_traceback(exc):
    """The traceback of ``exc`` as Python prints it, without gradviz's frames (the runner, the engine, the shim)
    or the import machinery's, so the user sees their own lines only."""
    try:
        te = traceback.TracebackException.from_exception(exc)
        _trim(te, set())
        return "".join(te.format())
    except Exception:  # an exception object too odd to format: its type is what we can say for sure
        return f"{type(exc).__qualname__}: <exception could not be formatted>\n"


def _trim(te, seen):
    if id(te) in seen:
        return
    seen.add(id(te))
    te.stack = traceback.StackSummary.from_list(_without_dispatch([f for f in te.stack]))
    for chained in (te.__cause__, te.__context__):
        if chained is not None:
            _trim(chained, seen)


def _without_dispatch(frames):
    """The frames that are not gradviz's, and not PyTorch's hand-over to gradviz's function mode either (the
    ``return handle_torch_function(...)`` line and ``handle_torch_function`` itself, right before a gradviz
    frame): what the traceback would be without the trace."""
    kept = []
    for f in frames:
        if _is_user_frame(f.filename):
            kept.append(f)
            continue
        while kept and (kept[-1].name == "handle_torch_function" or
                        (kept[-1].line or "").lstrip().startswith("return handle_torch_function(")):
            kept.pop()
    return kept


def _is_user_frame(filename):
    if filename.startswith("<frozen importlib"):
        return False
    path = os.path.abspath(filename)
    return not (path == _GRADVIZ_DIR or path.startswith(_GRADVIZ_DIR + os.sep))


def location_of(exc):
    """``file:line`` of the innermost user frame of ``exc``'s traceback, or None."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if _is_user_frame(f.filename)]
    if not frames:
        return None
    return f"{frames[-1].filename}:{frames[-1].lineno}"


def _reason(exc):
    return getattr(exc, "strerror", None) or str(exc)
