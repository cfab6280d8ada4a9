"""`import gradviz` binds almost nothing and loads the engine's names on first use (gradviz/__init__.py): what users
reach through the package is the same whichever way, and in whatever order, they reach it."""

import pkgutil
import subprocess
import sys
from pathlib import Path

import gradviz
from gradviz import _namespace

PACKAGE = Path(gradviz.__file__).parent


def _run(code):
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return out.splitlines()[-1]


def test_import_gradviz_alone_loads_no_numpy():
    assert _run("import sys, gradviz; print(sorted(m for m in sys.modules if m.startswith('numpy')))") == "[]"


def test_star_import_gives_every_name_in_all():
    got = _run("ns = {}\nexec('from gradviz import *', ns)\nimport gradviz\n"
               "print(sorted(set(gradviz.__all__) - set(ns)), len(gradviz.__all__))")
    assert got == f"[] {len(_namespace.__all__)}"


def test_first_use_loads_the_engine_names_together():
    got = _run("import gradviz\nx = gradviz.zeros(2)\nprint(gradviz.float32 is gradviz.dtypes.float32, "
               "type(x).__name__, 'Size' in vars(gradviz), gradviz.__all__ is gradviz._namespace.__all__)")
    assert got == "True Variable True True"


def test_dir_lists_the_engine_and_the_lazy_parts():
    got = _run("import gradviz\nnames = dir(gradviz)\n"
               "print(all(n in names for n in gradviz.__all__), 'nn' in names, 'trace' in names)")
    assert got == "True True True"


def test_unknown_names_and_probes_raise_attribute_error():
    got = _run("import sys, gradviz\nprint(hasattr(gradviz, '__wrapped__'), 'numpy' in sys.modules, "
               "hasattr(gradviz, 'no_such_op'), 'numpy' in sys.modules)")
    assert got == "False False False True"  # the probe loads nothing; an unknown name is looked for in the engine


def test_a_submodule_asked_for_by_name_loads_alone():
    got = _run("import sys\nfrom gradviz import document\n"
               "print(document.__name__, 'numpy' in sys.modules, 'gradviz._namespace' in sys.modules)")
    assert got == "gradviz.document False False"


def test_public_names_shared_with_a_submodule_are_bound_eagerly():
    """`gradviz.device` is the class even when engine imports loaded the module `gradviz.device` first."""
    submodules = {info.name for info in pkgutil.iter_modules([str(PACKAGE)])}
    shared = {name for name in vars(_namespace) if not name.startswith("_") and name in submodules
              and name != "autograd"}  # autograd is the submodule itself
    assert "device" in shared
    code = ("import gradviz.autograd, gradviz.nn, gradviz.optim, gradviz\nimport gradviz._namespace as ns\n"
            f"print([n for n in {sorted(shared)!r} if getattr(gradviz, n) is not getattr(ns, n)])")
    assert _run(code) == "[]"
