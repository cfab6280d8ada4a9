"""The diagnostic rules, one module per rule (or per small family of codes sharing their facts). Importing this
package imports every module in it, and each module registers its codes and rule (``diagnose/registry.py``)."""

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
