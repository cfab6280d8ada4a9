"""``--engine auto|gradviz|torch``: which engine a script runs on, decided before it runs.

- ``gradviz``: gradviz's own engine; ``import torch`` resolves to gradviz (the import shim, ``torch_shim.py``).
  ``--torch`` is kept as an alias.
- ``torch``: real PyTorch, watched by the torch adapter (it must be installed).
- ``auto`` (the default): a script whose source imports torch runs on real PyTorch when it is installed, and on
  gradviz's engine through the import shim when it is not, with a one-line note; any other script is traced
  with ``engine="auto"`` (gradviz's engine, and PyTorch too if something it imports brings torch in).
"""

import ast
import importlib.util

from .collector import paused

ENGINES = ("auto", "gradviz", "torch")
NO_TORCH = "--engine torch needs PyTorch, which is not installed: pip install 'gradviz[torch]'"
NOTE_SHIM = "PyTorch is not installed: running {script} on gradviz's engine through its `import torch` shim"
NOTE_UNSUPPORTED = "{reason}; meanwhile {script} runs on gradviz's engine through its `import torch` shim"


class EngineChoice:
    """``trace``: the ``engine=`` given to ``gradviz.trace``; ``shim``: install the import shim; ``note``: a line
    to print, or None; ``unseen``: the ``builder.unseen`` arguments saying real PyTorch was not watched (a
    fallback from an unsupported torch), or None."""

    def __init__(self, trace, shim, note=None, unseen=None):
        self.trace, self.shim, self.note, self.unseen = trace, shim, note, unseen


def torch_installed():
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return False


def imports_torch(path):
    """Whether the script's source imports torch anywhere (``import torch``, ``from torch... import``)."""
    try:
        with open(path, "rb") as f:
            tree = ast.parse(f.read(), filename=str(path))
    except (OSError, SyntaxError, ValueError):
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "torch" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "torch":
            return True
    return False


def choose(engine, script, use_torch_shim=False):
    """The engine for running ``script``; ``use_torch_shim`` is the old ``--torch`` flag (= ``gradviz``).
    Raises ``ValueError`` with one line when the choice cannot run."""
    if use_torch_shim:
        if engine not in ("auto", "gradviz"):
            raise ValueError(f"--torch is --engine gradviz; it cannot be combined with --engine {engine}")
        engine = "gradviz"
    if engine == "gradviz":
        return EngineChoice("gradviz", shim=True)
    if engine == "torch":
        if not torch_installed():
            raise ValueError(NO_TORCH)
        return _torch_or_shim(script)
    if imports_torch(script):
        if torch_installed():
            return _torch_or_shim(script)
        return EngineChoice("gradviz", shim=True, note=NOTE_SHIM.format(script=script))
    return EngineChoice("auto", shim=False)


def _torch_or_shim(script):
    """Real PyTorch when the installed one is a version the torch engine supports; else gradviz's engine through
    the shim, so a report is still written, with one line saying why and which torch would work."""
    reason = unsupported_torch()
    if reason is None:
        return EngineChoice("torch", shim=False)
    from ..tracing.adapters.torch.support import PIP_TORCH

    # the report is about gradviz's engine, not the user's torch: said in the document, not just on the terminal
    unseen = {"kind": "engine", "what": "real PyTorch (the script ran on gradviz's engine instead)", "how": reason,
              "advice": f"{PIP_TORCH}, then run it again"}
    return EngineChoice("gradviz", shim=True, note=NOTE_UNSUPPORTED.format(reason=reason, script=script),
                        unseen=unseen)


def unsupported_torch():
    """Why the installed torch cannot be traced (one line), or None. Imports it: the script is about to."""
    try:
        import torch
    except Exception as exc:  # a broken install: its own error, on one line
        from ..tracing.adapters.torch.support import PIP_TORCH

        first = str(exc).strip().split("\n")[0]
        return f"`import torch` fails ({type(exc).__name__}: {first}): {PIP_TORCH}"
    # gradviz's tracer after torch's import (the script's own, collected as usual): see collector.paused
    with paused():
        from ..tracing.adapters.torch.support import unsupported
    return unsupported(getattr(torch, "__version__", "unknown"))
