"""Dotted paths of modules and parameters (``model1.layer2``, ``model1.0.weight``), for any engine whose
modules answer ``named_modules()`` / ``named_parameters()`` and keep their children in ``_modules`` (gradviz's
``nn.Module`` and PyTorch's alike).

A root module (one the user's code called directly) is named as the calling code names it; its tree is walked
once and cached. A cached path is checked on each call (is the module still its parent's child of that name?),
so replacing a submodule (``model.fc = nn.Linear(...)``) walks the tree again once and the new module is
``model.fc``. Only weak references to modules and parameters are kept.
"""

import weakref

from ..frames import name_in_frames


class _ModuleTree:
    """A root module, the name the calling code gave it, and the paths of the modules in its tree."""

    __slots__ = ("ref", "name", "paths", "outside")

    def __init__(self, root, name):
        self.ref = weakref.ref(root)
        self.name = name
        self.paths = {}  # id(module) -> _ModuleName
        self.outside = set()  # ids of modules called under this root that are not in its tree

    def path_of(self, module):
        entry = self.paths.get(id(module))
        return entry.path if entry is not None and entry.valid(module) else None


class _ModuleName(weakref.ref):
    """A module's path in its root's tree, and the attribute names leading to it (to check it still does)."""

    __slots__ = ("path", "tree", "parts", "parent_path")

    def __new__(cls, module, path, tree, parts):
        return super().__new__(cls, module)

    def __init__(self, module, path, tree, parts):
        super().__init__(module)
        self.path = path
        self.tree = tree
        self.parts = parts
        self.parent_path = path.rpartition(".")[0] if parts else None

    def valid(self, module):
        """Still this module, still reached from the root by the same attribute names (a few dict lookups)."""
        if self() is not module:
            return False
        m = self.tree.ref()
        for part in self.parts:
            children = getattr(m, "_modules", None)
            if children is None:  # a module-like object that does not say: trust its named_modules()
                return True
            m = children.get(part)
        return m is module


class ModuleNames:
    """The paths given so far: per root module its tree, per module its first path, per parameter its path.

    ``path(module, parent, parent_path, frame)`` names a module being called; ``name_tree`` names a root module
    found some other way (a snapshot). Both return nothing about parameters directly: newly named parameters
    are collected in ``new_parameters`` (``{id(parameter): (parameter, path)}``) for the adapter to report."""

    def __init__(self):
        self._trees = {}  # id(root module) -> _ModuleTree
        self._module_names = {}  # id(module) -> _ModuleName: the first path each module was given
        self.param_names = {}  # id(parameter) -> (weakref, path)
        self.tree = None  # the _ModuleTree of the root module being called
        self.new_parameters = {}

    def parameter_path(self, param):
        """The path of ``param`` if a module tree named it, else None."""
        entry = self.param_names.get(id(param))
        if entry is not None and entry[0]() is param:
            return entry[1]
        return None

    def known_path(self, module):
        """The path ``module`` was first given, or None when no call has named it yet (no walk, no frame)."""
        entry = self._module_names.get(id(module))
        if entry is not None and entry() is module:
            return entry.path
        tree = self._trees.get(id(module))
        return tree.name if tree is not None and tree.ref() is module else None

    def path(self, module, parent, parent_path, find_frame):
        """The module's dotted path. ``parent``/``parent_path``: the module whose call this one runs in and its
        path (None when the user's code called it). ``find_frame(depth)`` finds the calling user code's frame
        (``frames.user_frame``), to name a new root module by what that code calls it."""
        tree = self.tree if parent is not None else None
        if tree is None:
            return self._root_path(module, find_frame)
        entry = tree.paths.get(id(module))
        if entry is not None:
            if entry.parent_path == parent_path and entry() is module:
                children = getattr(parent, "_modules", None)
                if children is None or children.get(entry.parts[-1]) is module:
                    return entry.path
            elif entry.valid(module):
                return entry.path
        if id(module) not in tree.outside:
            root = tree.ref()
            if root is not None:
                self.name_tree(root, tree.name, tree)
            path = tree.path_of(module)
            if path is not None:
                return path
            tree.outside.add(id(module))  # not in the tree (a module passed in as an argument): no re-walk next time
        return parent_path + "." + type(module).__name__

    def _root_path(self, module, find_frame):
        """A call from user code: a root we know, a submodule of one called directly (``model.features(x)``),
        or a new root, named as the calling code names it."""
        tree = self._trees.get(id(module))
        if tree is not None and tree.ref() is module:
            self.tree = tree
            return tree.name
        entry = self._module_names.get(id(module))
        if entry is not None and entry.valid(module):
            self.tree = entry.tree
            return entry.path
        frame = find_frame(2)
        # a list's item first: ``for layer in layers: layer(x)`` binds ``layer`` to each in turn
        name = self._free_name(_name_in_containers(frame, module), module) or \
            self._free_name(name_in_frames(frame, module), module) or \
            self._numbered(type(module).__name__, module)
        self.tree = tree = _ModuleTree(module, name)
        self.name_tree(module, name, tree)
        return name

    def _taken(self, module):
        """Root names in use: by another live root module, or by parameters that outlive theirs (a module
        called once as a temporary, ``nn.Linear(2, 1)(h)``: the graph keeps its parameters)."""
        taken = {tree.name for tree in self._trees.values() if tree.ref() is not None and tree.ref() is not module}
        for ref, path in self.param_names.values():
            if ref() is not None:
                taken.update(path[:end] for end in range(len(path)) if path[end] == ".")
        return taken

    def _free_name(self, name, module):
        """``name`` unless another live root module has it (``for layer in layers: layer(x)`` finds ``layer``
        for each: two Linear layers' parameters would both be ``layer.weight``)."""
        return name if name is not None and name not in self._taken(module) else None

    def _numbered(self, name, module):
        taken, number = self._taken(module), 1
        while (f"{name}_{number}" if number > 1 else name) in taken:
            number += 1
        return f"{name}_{number}" if number > 1 else name

    def name_tree(self, module, name, tree=None):
        """Dotted paths for a root module's submodules and parameters (``model1.conv.weight``). A module or a
        parameter keeps the first path it was given outside this tree; inside the tree its path is the tree's."""
        if tree is None:
            tree = _ModuleTree(module, name)
        try:
            self._trees[id(module)] = tree
        except TypeError:
            pass
        tree.outside = set()
        tree.paths = {}
        try:
            pairs = list(module.named_modules())
        except Exception:  # not a module after all: name the object alone
            pairs = [("", module)]
        for sub, m in pairs:
            try:
                entry = _ModuleName(m, f"{name}.{sub}" if sub else name, tree, tuple(sub.split(".")) if sub else ())
            except TypeError:
                continue
            tree.paths[id(m)] = entry
            known = self._module_names.get(id(m))
            if known is None or known() is not m:
                self._module_names[id(m)] = entry
        named = getattr(module, "named_parameters", None)
        for pname, p in (named() if named is not None else ()):
            path = f"{name}.{pname}"
            if id(p) in self.param_names and self.param_names[id(p)][0]() is p:
                continue
            self.param_names[id(p)] = (weakref.ref(p), path)
            self.new_parameters[id(p)] = (p, path)

    def take_new_parameters(self):
        """The parameters named since the last call, ``{id: (parameter, path)}`` (strong references: report
        them and let go)."""
        found = self.new_parameters
        self.new_parameters = {}
        return found


def _name_in_containers(frame, obj, depth=4):
    """``layers[1]`` when a list or tuple of modules the user's code binds (in this frame or a few outer ones)
    holds ``obj``; identity, never ==. Lists with other things (``(model, x, y)``: a bundle of arguments, not a
    stack of layers) and long lists (data) do not name a module."""
    while frame is not None and depth > 0:
        for scope in (frame.f_locals, frame.f_globals):
            for key, value in list(scope.items()):
                if isinstance(value, (list, tuple)) and len(value) <= 1000 and not key.startswith("_") and \
                        any(item is obj for item in value) and all(_is_module(item) for item in value):
                    return f"{key}[{next(n for n, item in enumerate(value) if item is obj)}]"
        frame = frame.f_back
        depth -= 1
    return None


def _is_module(obj):
    return callable(getattr(obj, "named_parameters", None)) and hasattr(obj, "_modules")
