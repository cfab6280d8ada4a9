"""Dotted paths of ``torch.nn`` modules and parameters, as gradviz's own modules are named.

A module the user's code calls directly is a root, named as the calling code binds it (``model``; its class
name if no name binds it). Its submodules and parameters get their paths from the root's ``named_modules()`` /
``named_parameters()``, walked once per root and again when a cached path no longer leads to the module (a
replaced layer). A module called inside another's forward but not in its tree is ``parent.ClassName``.
"""

import weakref

from ..frames import name_in_frames


class _Root:
    __slots__ = ("ref", "name", "paths", "outside")

    def __init__(self, root, name):
        self.ref = weakref.ref(root)
        self.name = name
        self.paths = {}  # id(module) -> (weakref, path)
        self.outside = set()


class ModuleNames:
    """Paths for module calls, given the stack of modules being called (innermost last)."""

    def __init__(self, on_parameters):
        self._roots = {}  # id(root module) -> _Root
        self._first = {}  # id(module) -> (weakref, path, _Root): the first path a module was given
        self._on_parameters = on_parameters  # called with {id(parameter): path} for each tree walked

    def path(self, module, parent, parent_path, frame):
        """The path of ``module`` called under ``parent`` (None for a call from user code, whose frame is
        ``frame``)."""
        if parent is None:
            return self._root_path(module, frame)
        root = self._root_of(parent)
        if root is not None:
            entry = root.paths.get(id(module))
            if entry is not None and entry[0]() is module and self._still_there(root, entry[1], module):
                return entry[1]
            if id(module) not in root.outside:
                tree = root.ref()
                if tree is not None:
                    self._walk(tree, root)
                entry = root.paths.get(id(module))
                if entry is not None:
                    return entry[1]
                root.outside.add(id(module))
        return f"{parent_path}.{type(module).__name__}"

    def _root_of(self, module):
        entry = self._first.get(id(module))
        if entry is not None and entry[0]() is module:
            return entry[2]
        return None

    @staticmethod
    def _still_there(root, path, module):
        m = root.ref()
        parts = path.split(".")[1:] if "." in path else []
        for part in parts:
            children = getattr(m, "_modules", None)
            if children is None:
                return True
            m = children.get(part)
        return m is module

    def _root_path(self, module, frame):
        root = self._roots.get(id(module))
        if root is not None and root.ref() is module:
            return root.name
        entry = self._first.get(id(module))
        if entry is not None and entry[0]() is module and self._still_there(entry[2], entry[1], module):
            return entry[1]
        name = name_in_frames(frame, module) or type(module).__name__
        root = _Root(module, name)
        self._roots[id(module)] = root
        self._walk(module, root)
        return name

    def _walk(self, module, root):
        root.paths = {}
        root.outside = set()
        name = root.name
        try:
            pairs = list(module.named_modules())
        except Exception:  # a module whose named_modules() fails: name it alone
            pairs = [("", module)]
        for sub, m in pairs:
            path = f"{name}.{sub}" if sub else name
            ref = weakref.ref(m)
            root.paths[id(m)] = (ref, path)
            known = self._first.get(id(m))
            if known is None or known[0]() is not m:
                self._first[id(m)] = (ref, path, root)
        params = {}
        try:
            for pname, p in module.named_parameters():
                params[id(p)] = f"{name}.{pname}"
        except Exception:
            pass
        if params:
            self._on_parameters(params)
