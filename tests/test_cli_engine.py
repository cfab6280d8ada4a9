"""``--engine auto|gradviz|torch`` on ``gradviz run`` and ``gradviz graph``, and ``--torch`` as its alias."""

import json
import os
import subprocess
import sys

import pytest

import gradviz
from gradviz.cli import engine as engine_choice

from .test_cli import script, stderr_of


@pytest.fixture
def cli(tmp_path, monkeypatch):
    """Invoke the CLI in a fresh working folder."""
    from click.testing import CliRunner

    from gradviz.cli import main

    monkeypatch.chdir(tmp_path)
    runner = CliRunner(env={"COLUMNS": "250"})
    return lambda *args: runner.invoke(main, list(args), catch_exceptions=False)


TORCH_SCRIPT = """\
import torch

w = torch.randn(3, requires_grad=True)
y = w * 2
g = y.grad
loss = y.sum()
loss.backward()
"""
GRADVIZ_SCRIPT = TORCH_SCRIPT.replace("import torch", "import gradviz as torch")
needs_torch = pytest.mark.skipif(not engine_choice.torch_installed(), reason="PyTorch is not installed")


def _report(tmp_path):
    with open(tmp_path / "out" / "report.json") as f:
        return json.load(f)


def _codes(doc):
    return [(d["code"], d["location"]["line"]) for d in doc["diagnostics"]]


@needs_torch
@pytest.mark.parametrize("how", [(), ("--engine", "auto"), ("--engine", "torch")])
def test_a_torch_script_runs_on_real_pytorch(cli, tmp_path, how):
    name = script(tmp_path, TORCH_SCRIPT)
    result = cli("run", *how, "--no-render", "--out", "out", name)
    assert result.exit_code == 0, result.stderr
    doc = _report(tmp_path)
    assert doc["engine"]["name"] == "torch" and doc["engine"]["version"].startswith("2.")
    assert _codes(doc) == [("none-grad", 5)]
    assert {n["op"] for n in doc["nodes"]} >= {"MulBackward0", "SumBackward0"}  # PyTorch's own node names


@pytest.mark.parametrize("how", [("--torch",), ("--engine", "gradviz")])
def test_torch_flag_is_engine_gradviz(cli, tmp_path, how):
    name = script(tmp_path, TORCH_SCRIPT)
    result = cli("run", *how, "--no-render", "--out", "out", name)
    assert result.exit_code == 0, result.stderr
    doc = _report(tmp_path)
    assert doc["engine"]["name"] == "gradviz"
    assert _codes(doc) == [("none-grad", 5)]


def test_auto_without_pytorch_runs_on_the_shim_and_says_so(cli, tmp_path, monkeypatch):
    monkeypatch.setattr(engine_choice, "torch_installed", lambda: False)
    name = script(tmp_path, TORCH_SCRIPT)
    result = cli("run", "--no-render", "--out", "out", name)
    assert result.exit_code == 0, result.stderr
    assert stderr_of(result).splitlines()[0] == (
        "gradviz: PyTorch is not installed: running script.py on gradviz's engine through its `import torch` shim")
    assert _report(tmp_path)["engine"]["name"] == "gradviz"


def test_engine_torch_without_pytorch_is_one_line(cli, tmp_path, monkeypatch):
    monkeypatch.setattr(engine_choice, "torch_installed", lambda: False)
    name = script(tmp_path, TORCH_SCRIPT)
    result = cli("run", "--engine", "torch", name)
    assert (result.exit_code, stderr_of(result)) == (
        1, "gradviz: error: --engine torch needs PyTorch, which is not installed: pip install 'gradviz[torch]'\n")


def test_torch_flag_with_engine_torch_is_refused(cli, tmp_path):
    name = script(tmp_path, TORCH_SCRIPT)
    result = cli("run", "--torch", "--engine", "torch", name)
    assert (result.exit_code, stderr_of(result)) == (
        1, "gradviz: error: --torch is --engine gradviz; it cannot be combined with --engine torch\n")


def test_a_gradviz_script_under_auto_stays_on_gradviz(cli, tmp_path):
    name = script(tmp_path, GRADVIZ_SCRIPT)
    result = cli("run", "--no-render", "--out", "out", name)
    assert result.exit_code == 0, result.stderr
    doc = _report(tmp_path)
    assert _codes(doc) == [("none-grad", 5)] and {n["op"] for n in doc["nodes"]} >= {"MulBackward"}


@needs_torch
def test_graph_takes_the_engine_too(cli, tmp_path):
    name = script(tmp_path, TORCH_SCRIPT)
    result = cli("graph", "--engine", "torch", "--format", "dot", "-o", "g.dot", name)
    assert result.exit_code == 0, result.stderr
    text = (tmp_path / "g.dot").read_text()
    assert "MulBackward0" in text and "SumBackward0" in text


def test_imports_torch_reads_the_source(tmp_path):
    for text, expected in [("import torch\n", True), ("import torch.nn as nn\n", True),
                           ("from torch import nn\n", True), ("def f():\n    import torch\n", True),
                           ("import torchvision\n", False), ("import gradviz as torch\n", False),
                           ("from .torch import x\n", False), ("x = 'import torch'\n", False)]:
        path = tmp_path / "s.py"
        path.write_text(text)
        assert engine_choice.imports_torch(str(path)) is expected, text


@needs_torch
def test_a_failing_script_shows_the_traceback_pytorch_shows(tmp_path):
    """The user's traceback under the trace is the one plain Python prints: no gradviz frames, none of the
    function mode's hand-over frames, PyTorch's exception type and message."""
    path = tmp_path / "fails.py"
    path.write_text("import torch\nx = torch.randn(3, requires_grad=True)\n(x * 2).backward()\n")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    plain = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=env)
    traced = subprocess.run([sys.executable, "-m", "gradviz", "run", "--engine", "torch", "--no-render", "--out",
                             str(tmp_path / "out"), str(path)], capture_output=True, text=True, env=env)
    expected = plain.stderr[plain.stderr.index("Traceback"):]
    got = traced.stderr[traced.stderr.index("Traceback"):]
    assert got[:len(expected)] == expected
    package = os.path.dirname(os.path.abspath(gradviz.__file__)) + os.sep  # (the checkout may be named gradviz)
    assert package not in expected and package not in got
    assert "RuntimeError: grad can be implicitly created" in expected


def test_help_and_import_gradviz_import_no_torch():
    """(Its speed is measured, not asserted: `gradviz --help` only loads click and the command modules.)"""
    code = ("import sys; from gradviz.cli import main\n"
            "try:\n    main(['run', '--help'])\nexcept SystemExit:\n    pass\n"
            "print('TORCH', 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "--engine [auto|gradviz|torch]" in out
    assert out.splitlines()[-1] == "TORCH False"
    loaded = subprocess.run([sys.executable, "-c", "import sys, gradviz; print('torch' in sys.modules)"],
                            capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "False"
