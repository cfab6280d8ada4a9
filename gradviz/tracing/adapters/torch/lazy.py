"""``engine="auto"`` and PyTorch: watch real PyTorch too when it is installed, from the moment it is imported
(before the traced block or during it), without importing it ourselves.
"""

import importlib.abc
import importlib.util
import sys


def torch_engines():
    """The torch adapter ``auto`` adds: ``torch`` when it is imported already, ``torch-when-imported`` when it
    is installed but not imported (found without importing it), nothing when it is not installed."""
    if "torch" in sys.modules:
        return ["torch"]
    try:
        return ["torch-when-imported"] if importlib.util.find_spec("torch") is not None else []
    except (ImportError, ValueError):
        return []


class TorchWhenImported:
    """An adapter that becomes the torch adapter once ``import torch`` completes (while attached)."""

    name = "torch"

    def __init__(self, builder):
        self.builder = builder
        self.adapter = None
        self._watcher = None
        self._exact = False

    def exact_memory(self):
        self._exact = True
        if self.adapter is not None:
            self.adapter.exact_memory()

    def _torch_imported(self):
        from .engine import TorchAdapter, TorchVersionError

        try:
            self.adapter = TorchAdapter(self.builder)
        except TorchVersionError as exc:  # auto falls back to gradviz's engine alone, and says why
            self.builder.internal_errors.append({"where": "torch adapter", "type": type(exc).__name__,
                                                 "message": str(exc)})
            return
        if self._exact:
            self.adapter.exact_memory()
        self.adapter.attach()

    def attach(self):
        if self.adapter is not None:
            self.adapter.attach()
        elif "torch" in sys.modules:
            self._torch_imported()
        elif self._watcher is None:
            self._watcher = _ImportWatcher(self._on_import)
            sys.meta_path.insert(0, self._watcher)

    def _on_import(self):
        self._remove_watcher()
        if self.adapter is None:
            self._torch_imported()

    def _remove_watcher(self):
        if self._watcher is not None:
            try:
                sys.meta_path.remove(self._watcher)
            except ValueError:
                pass
            self._watcher = None

    def detach(self):
        self._remove_watcher()
        if self.adapter is not None:
            self.adapter.detach()

    def __getattr__(self, name):  # finish, refresh, raised, key_for_*, name_from_frame: the torch adapter's
        adapter = self.__dict__.get("adapter")
        if adapter is not None:
            return getattr(adapter, name)
        if name.startswith("key_for_"):
            return lambda obj: None
        if name in ("finish", "refresh", "raised", "name_from_frame"):
            return lambda *args, **kwargs: None
        if name == "is_graph_output":  # torch never imported: nothing of it holds a graph
            return lambda value: False
        raise AttributeError(name)


class _ImportWatcher(importlib.abc.MetaPathFinder):
    """Finds nothing itself: when ``torch`` is about to be imported, it lets the other finders find it and runs
    ``on_import`` right after the module has executed."""

    def __init__(self, on_import):
        self.on_import = on_import
        self.busy = False

    def find_spec(self, name, path=None, target=None):
        if name != "torch" or self.busy:
            return None
        self.busy = True
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self.busy = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        exec_module = spec.loader.exec_module
        on_import = self.on_import

        def exec_then_watch(module):
            exec_module(module)
            on_import()

        spec.loader.exec_module = exec_then_watch
        return spec
