"""The layers stay apart: the engine imports numpy alone, `import gradviz` loads no debugger parts, the document
contract (gradviz.document) imports no producer or consumer, tracing never imports rendering, and rendering and
diagnose read documents only."""

import ast
import subprocess
import sys
from pathlib import Path

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


# -- the document contract between producers and consumers ---------------------------------------------------------
PACKAGE = Path(__file__).resolve().parent.parent / "gradviz"
ENGINE = ("gradviz.autograd", "gradviz.ops", "gradviz.nn", "gradviz.optim", "gradviz.utils", "gradviz.functions",
          "gradviz.factories")


def _imports(path):
    """Every module ``path`` imports (at the top or inside a function), as absolute dotted names."""
    package = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if path.name != "__init__.py":
        package = package.rsplit(".", 1)[0]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)  # `from .. import rendering`
    return names


def _offending(folder, forbidden):
    bad = []
    for path in sorted((PACKAGE / folder).rglob("*.py")):
        for name in sorted(_imports(path)):
            if name == "gradviz" or any(name == f or name.startswith(f + ".") for f in forbidden):
                bad.append(f"{path.relative_to(PACKAGE.parent)} imports {name}")
    return bad


def test_import_scanner_resolves_relative_imports():
    # the scanner itself must see what it polices: the facade's lazy relative imports of both sides
    names = _imports(PACKAGE / "viz.py")
    assert {"gradviz.rendering", "gradviz.tracing.engine_snapshot", "gradviz.autograd", "gradviz.document"} <= names


def test_rendering_reads_documents_only():
    # rendering may import the contract (gradviz.document), never the engine, the tracer, diagnose or the CLI;
    # nor `import gradviz` as a back door to them
    assert _offending("rendering", ENGINE + ("gradviz.tracing", "gradviz.diagnose", "gradviz.cli",
                                             "gradviz.viz")) == []


def test_diagnose_reads_documents_only():
    assert _offending("diagnose", ENGINE + ("gradviz.tracing", "gradviz.rendering", "gradviz.cli", "gradviz.viz")) == []


def test_the_contract_imports_no_producer_and_no_consumer():
    assert _offending("document", ENGINE + ("gradviz.tracing", "gradviz.rendering", "gradviz.diagnose",
                                            "gradviz.cli", "gradviz.viz")) == []


def test_tracing_never_imports_rendering():
    assert _offending("tracing", ("gradviz.rendering", "gradviz.cli")) == []
    loaded = _modules_after("import gradviz.tracing\n"
                            "with gradviz.tracing.trace() as tr:\n"
                            "    w = gradviz.randn(3, requires_grad=True)\n"
                            "    (w * 2).sum().backward()\n"
                            "tr.to_dict()")
    assert "gradviz.tracing" in loaded
    assert not {m for m in loaded if m.startswith("gradviz.rendering") or m.split(".")[0] in HEAVY}


def test_loading_a_trace_needs_neither_tracer_nor_renderer(tmp_path):
    with_trace = "import gradviz\nwith gradviz.trace() as tr:\n    (gradviz.ones(2, requires_grad=True) * 2).sum()\n"
    path = tmp_path / "t.json"
    subprocess.run([sys.executable, "-c", with_trace + f"tr.to_json({str(path)!r})"], check=True)
    loaded = _modules_after(f"import gradviz.document\ngradviz.document.load_trace({str(path)!r})")
    assert not {m for m in loaded if m.startswith(("gradviz.tracing", "gradviz.rendering", "gradviz.diagnose"))}
