"""The diagnostic rules, one module per rule (or per small family of codes sharing their facts). Each module
registers its codes and rules when imported (``diagnose/registry.py``); ``load()`` imports every module found on
this package's path, and the registry calls it before it is read, so a module dropped here is picked up."""

import importlib
import pkgutil
import sys


def load():
    """Import every rule module on the package's path that is not imported yet."""
    for module in pkgutil.iter_modules(__path__):
        name = f"{__name__}.{module.name}"
        if name not in sys.modules:
            importlib.import_module(name)


load()
