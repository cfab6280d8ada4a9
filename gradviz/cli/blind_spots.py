"""Why ``gradviz run`` saw no autograd work, told from what only the runner knows: the engine chosen, what the
script's globals bind (``import gradviz as torch`` under ``--engine torch``), the child processes it started and
how it ended. Rewords the document's ``no-autograd`` entry (tracing/no_autograd.py) in place."""

import sys
import types

from ..document.coverage import no_autograd_entry


def explain_no_autograd(doc, engine, script_globals):
    """Give the document's ``no-autograd`` entry, if any, the likely reason for this run. ``engine`` is the
    trace's (``auto``, ``gradviz``, ``torch``); ``script_globals`` the script's ``__main__`` namespace."""
    entry = no_autograd_entry(doc)
    if entry is None:
        return
    uses = _engines_bound(script_globals or {})
    children = [e for e in doc.get("unseen") or () if e.get("kind") == "child-process"]
    if engine == "torch" and uses.get("gradviz"):
        name, module = uses["gradviz"][0]
        alias = f" (`{name}` is `{module}`)" if name.split(".")[0] != module.split(".")[0] else ""
        entry["how"] = f"the script runs on gradviz's engine{alias}, but this run watched real PyTorch only"
        entry["advice"] = "run it with --engine gradviz"
    elif engine == "gradviz" and uses.get("torch"):
        name, module = uses["torch"][0]
        entry["how"] = (f"the script uses real PyTorch (`{name}` is `{module}`, imported past the `import torch` "
                        "shim), but this run watched gradviz's engine only")
        entry["advice"] = "run it with --engine torch"
    elif children:
        count = sum(e.get("count") or 1 for e in children)
        hows = sorted({e.get("how") for e in children if e.get("how")})
        started = f", started with {', '.join(hows)}" if hows else ""
        entry["how"] = f"the work may have run in the {count} child process(es) the script started{started}: " \
                       "gradviz traces the main process only"
        entry["advice"] = "run the training in the main process while debugging (one worker, no spawn)"
    else:
        stopped = _stopped_at(doc)
        entry["how"] = f"no operation on a tensor that requires grad ran{stopped} (watching {_engine_words(engine)})"
        entry["advice"] = ("check that the script builds a graph (parameters, or inputs with requires_grad=True) "
                           "and that its training code runs (an `if __name__ == \"__main__\":` guard, arguments)")


def _engines_bound(script_globals):
    """``{"gradviz": [(name, module)], "torch": [...]}``: the script's global names bound to gradviz's or real
    PyTorch's modules, classes or functions (under any name: ``import gradviz as torch``)."""
    found = {}
    for name, value in list(script_globals.items()):
        if name.startswith("__"):
            continue
        module = _module_of(value)
        if module is None:
            continue
        root = module.split(".")[0]
        if root == "gradviz" or (root == "torch" and _is_shim(value)):
            found.setdefault("gradviz", []).append((name, module))
        elif root == "torch":
            found.setdefault("torch", []).append((name, module))
    return found


def _module_of(value):
    if isinstance(value, types.ModuleType):
        if _is_shim(value):  # the `import torch` shim's stand-in: gradviz under torch's name
            return "gradviz"
        return getattr(value, "__name__", None)
    if isinstance(value, (type, types.FunctionType, types.BuiltinFunctionType)):
        module = getattr(value, "__module__", None)
        return module if isinstance(module, str) else None
    return None


def _is_shim(value):
    return isinstance(value, types.ModuleType) and "_gradviz_target" in vars(value)


def _stopped_at(doc):
    status = doc.get("status") or {}
    exc = status.get("exception") or {}
    if exc.get("type"):
        location = exc.get("location") or {}
        at = f" at line {location['line']}" if location.get("line") else ""
        return f" before the script stopped{at} ({exc['type']})"
    return ""


def _engine_words(engine):
    if engine == "torch":
        return "real PyTorch"
    if engine == "gradviz":
        return "gradviz's engine"
    return "gradviz's engine" + (" and real PyTorch" if "torch" in sys.modules else "")
