"""The layers stay apart: the engine imports numpy alone, and `import gradviz` loads no debugger parts."""

import subprocess
import sys

HEAVY = ("rich", "click", "graphviz")


def _modules_after(code):
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys\nprint(' '.join(sorted(sys.modules)))"],
                         capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_engine_import_pulls_in_no_debugger_dependencies():
    loaded = _modules_after("import gradviz.autograd, gradviz.nn, gradviz.optim")
    assert not {m for m in loaded if m.split(".")[0] in HEAVY}


def test_import_gradviz_is_light():
    loaded = _modules_after("import gradviz\nx = gradviz.randn(3, requires_grad=True)\n(x * 2).sum().backward()")
    assert not {m for m in loaded if m.split(".")[0] in HEAVY}
    assert "gradviz.rendering" not in loaded and "gradviz.cli" not in loaded


def test_engine_modules_do_not_import_tracing_rendering_or_cli():
    loaded = _modules_after("import gradviz.autograd, gradviz.nn, gradviz.optim")
    assert not {m for m in loaded if m.startswith(("gradviz.tracing", "gradviz.diagnose", "gradviz.rendering",
                                                   "gradviz.cli"))}
