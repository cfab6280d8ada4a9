"""The run as a pipeline: a plain `gradviz run` stays out of gradviz.distributed, the commands share the
pipeline's public steps instead of each other's private names, and the steps compose into the run."""

import ast
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gradviz.cli import pipeline
from gradviz.cli.output import Output

pytestmark = pytest.mark.filterwarnings("ignore:The .grad attribute:UserWarning")

REPO = Path(__file__).resolve().parent.parent
CLI = REPO / "gradviz" / "cli"
COMMANDS = {"run", "graph", "torchrun", "explain", "supported"}

PLAIN = """\
import gradviz as torch

x = torch.tensor([1.0, 2.0], requires_grad=True)
y = x * 3
y.sum().backward()
print(y.grad)
"""

PROBE = """\
import atexit, sys

def modules():
    sys.__stderr__.write("MODULES " + " ".join(sorted(m for m in sys.modules if m.startswith("gradviz."))) + "\\n")

atexit.register(modules)
from gradviz.cli import main

main([*sys.argv[1:]])
"""


def run_probe(tmp_path, *args):
    (tmp_path / "probe.py").write_text(PROBE)
    env = dict(os.environ, PYTHONPATH=str(REPO), COLUMNS="200")
    proc = subprocess.run([sys.executable, "probe.py", *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=240)
    [line] = [line for line in proc.stderr.splitlines() if line.startswith("MODULES ")]
    return proc, set(line.split()[1:])


def test_a_plain_run_never_imports_gradviz_distributed(tmp_path):
    (tmp_path / "plain.py").write_text(PLAIN)
    proc, modules = run_probe(tmp_path, "run", "--no-render", "--fail-on", "warning", "plain.py")
    assert proc.returncode == 1, proc.stderr  # the none-grad warning, with --fail-on warning
    assert "none-grad  plain.py:6" in proc.stdout
    assert "gradviz.cli.pipeline" in modules and "gradviz.tracing" in modules
    assert sorted(m for m in modules if m.startswith("gradviz.distributed")) == []
    doc = json.loads((tmp_path / "gradviz-out" / "plain" / "report.json").read_text())
    assert doc["process"]["how"] == "main" and doc["process"]["run_id"] is None
    assert [d["code"] for d in doc["diagnostics"]] == ["none-grad"]
    assert not (tmp_path / "gradviz-out" / "plain" / "processes").exists()


def test_a_run_on_pytorch_never_imports_gradviz_own_engine(tmp_path):
    """A trace of PyTorch reads torch's graph only: gradviz's numpy engine and its adapter stay unimported (their
    import was a fixed cost of every torch run, through the tracer's ``snapshot``)."""
    pytest.importorskip("torch")
    (tmp_path / "real.py").write_text(PLAIN.replace("import gradviz as torch", "import torch"))
    proc, modules = run_probe(tmp_path, "run", "--no-render", "--engine", "torch", "--fail-on", "never", "real.py")
    assert proc.returncode == 0, proc.stderr
    assert "none-grad  real.py:6" in proc.stdout
    assert "gradviz.tracing.adapters.torch.events" in modules
    assert sorted(m for m in modules if m.startswith(("gradviz.autograd", "gradviz.tracing.adapters.gradviz",
                                                       "gradviz.tracing.engine_snapshot"))) == []


def test_a_plain_run_clears_an_earlier_runs_process_documents(tmp_path):
    (tmp_path / "plain.py").write_text(PLAIN)
    earlier = tmp_path / "gradviz-out" / "plain" / "processes"
    earlier.mkdir(parents=True)
    (earlier / "child-pid12.json").write_text("{}")
    proc, modules = run_probe(tmp_path, "run", "--no-render", "--fail-on", "never", "plain.py")
    assert proc.returncode == 0, proc.stderr
    assert not earlier.exists()
    assert "gradviz.distributed.launch" in modules  # loaded for the clean-up, and only then


def test_commands_share_the_pipeline_not_each_others_names():
    """No command module imports from another command module, and nothing imports a private name across
    modules of the CLI."""
    for path in sorted(CLI.glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                assert node.module not in COMMANDS or path.stem == "__init__", (path.name, node.module)
                private = [a.name for a in node.names if a.name.startswith("_")]
                assert private == [], (path.name, node.module, private)


def test_the_pipeline_runs_a_script_from_run_options(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "plain.py").write_text(PLAIN)
    opts = pipeline.RunOptions(script="plain.py", out_dir="here", draw=False, fail_on="warning", engine="gradviz")
    status = pipeline.run(Output(), opts)
    out, err = capsys.readouterr()
    assert status == 1
    assert "none-grad  plain.py:6" in out
    assert "1 diagnostic at or above `warning` (--fail-on warning): exit status 1" in err
    assert f"Wrote 2 files to here{os.sep}" in out
    assert json.loads((tmp_path / "here" / "report.json").read_text())["script"] == "plain.py"


def test_run_options_reach_the_trace(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "loop.py").write_text(textwrap.dedent("""\
        import gradviz as torch

        w = torch.tensor([1.0], requires_grad=True)
        for _ in range(6):
            (w * 2).sum().backward()
    """))
    opts = pipeline.RunOptions(script="loop.py", json_only=True, engine="gradviz",
                               schedule={"light": True, "full_steps": 1})
    assert pipeline.run(Output(quiet=True), opts) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schedule"]["full_steps"] == 1 and len(doc["backwards"]) < 6


def test_a_module_run_with_sarif_stays_out_of_gradviz_distributed_too(tmp_path):
    """-m and --sarif go through the pipeline's steps (compile_target, write_sarif), not the job's."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "train.py").write_text(PLAIN)
    proc, modules = run_probe(tmp_path, "run", "--no-render", "--fail-on", "never", "--sarif", "found.sarif",
                              "-m", "pkg.train")
    assert proc.returncode == 0, proc.stderr
    assert sorted(m for m in modules if m.startswith("gradviz.distributed")) == []
    assert "Wrote SARIF to found.sarif" in proc.stdout
    [result] = json.loads((tmp_path / "found.sarif").read_text())["runs"][0]["results"]
    location = result["locations"][0]["physicalLocation"]
    assert result["ruleId"] == "none-grad"
    assert (location["artifactLocation"]["uri"], location["region"]["startLine"]) == ("pkg/train.py", 6)
    doc = json.loads((tmp_path / "gradviz-out" / "pkg.train" / "report.json").read_text())
    assert [d["code"] for d in doc["diagnostics"]] == ["none-grad"]


def test_run_options_with_a_module_and_sarif_reach_their_steps(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "__main__.py").write_text(PLAIN)
    opts = pipeline.RunOptions(script="pkg", as_module=True, sarif_path="out/x.sarif", draw=False,
                               engine="gradviz")
    assert pipeline.resolve_out_dir(opts) == str(tmp_path / "gradviz-out" / "pkg")
    (tmp_path / "out").mkdir()
    assert pipeline.run(Output(), opts) == 0  # none-grad is a warning, below the default --fail-on error
    out = capsys.readouterr().out
    assert "none-grad  pkg/__main__.py:6" in out and "Wrote SARIF to out/x.sarif" in out
    results = json.loads((tmp_path / "out" / "x.sarif").read_text())["runs"][0]["results"]
    assert [r["ruleId"] for r in results] == ["none-grad"]


SEES_RENDERING = """\
import sys

import gradviz as torch

loaded = sorted(m for m in sys.modules if m.startswith("gradviz.rendering"))
sys.__stderr__.write("WHILE-RUNNING " + " ".join(loaded) + "\\n")
x = torch.tensor([1.0, 2.0], requires_grad=True)
(x * 3).sum().backward()
"""


@pytest.mark.parametrize("rankdir", [None, "lr"])
def test_the_script_runs_before_the_rendering_package_is_loaded(tmp_path, rankdir):
    # the default --rankdir is not checked against the rendering package: its import (numpy's with it) is part
    # of every run's start-up otherwise; a given one still is, and reaches the pictures
    (tmp_path / "sees.py").write_text(SEES_RENDERING)
    extra = ["--rankdir", rankdir] if rankdir else []
    proc, modules = run_probe(tmp_path, "run", "--fail-on", "never", "--format", "dot", *extra, "sees.py")
    assert proc.returncode == 0, proc.stderr
    [line] = [line for line in proc.stderr.splitlines() if line.startswith("WHILE-RUNNING")]
    if rankdir is None:
        assert line.split()[1:] == []
    assert "gradviz.rendering.html" in modules  # loaded afterwards, for the report
    [picture] = (tmp_path / "gradviz-out" / "sees").glob("structure-*.dot")
    assert ("rankdir=LR" in picture.read_text()) == (rankdir == "lr")
