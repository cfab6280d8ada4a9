"""torch.__version__ under the shim: a TorchVersion that says it is gradviz and compares as a version."""

import json
import os
import subprocess
import sys

import pytest

from gradviz import _version
from gradviz.cli.torch_shim import TorchShim, exposed_names
from gradviz.torch_version import TorchVersion
from gradviz.version import TORCH_API_LEVEL

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_shim_version_is_the_api_level_labelled_gradviz():
    with TorchShim():
        import torch

        assert torch.__version__ == f"{TORCH_API_LEVEL}+gradviz.{_version.__version__}"
        assert torch.version.__version__ is torch.__version__
        assert torch.version.cuda is None and torch.version.hip is None and torch.version.debug is False
        assert torch.__version__ >= "2.0" and torch.__version__ < (3, 0)
        assert torch.__version__.split(".")[:2] == TORCH_API_LEVEL.split(".")[:2]
    assert "__version__" in exposed_names("torch") and "cuda" in exposed_names("torch.version")


@pytest.mark.parametrize("left, op, right, expected", [
    ("2.13.0", ">", "2.9", True),          # not character order
    ("2.0", "==", "2.0.0", True),
    ("2.0", "==", (2, 0, 0), True),
    ("2.13.0+cpu", ">", "2.13.0", True),   # a local label sorts after the same public version
    ("2.14.0a0", "<", "2.14.0", True),
    ("2.14.0.dev20250101", "<", "2.14.0a0", True),
    ("2.13.0rc1", "<", "2.13.0", True),
    ("2.13.0", "<", (2, 13, 1), True),
    ("1.13", ">=", "2.0", False),
])
def test_comparisons(left, op, right, expected):
    ops = {">": "__gt__", "<": "__lt__", "==": "__eq__", ">=": "__ge__"}
    assert getattr(TorchVersion(left), ops[op])(right) is expected


def test_not_a_version_compares_as_a_string():
    assert TorchVersion("2.0") != "banana" and TorchVersion("abc") < "abd"


@pytest.mark.oracle
def test_same_answers_as_pytorch():
    torch_version = pytest.importorskip("torch.torch_version")
    versions = ["2.0", "2.13", "2.9.1", "2.13.0", "2.13.0+cpu", "2.14.0a0", "2.13.0rc1", "2.13.0.dev20250101",
                "1.13", "3", (2, 0), (2, 13, 0), (2, 14), "2.13.0+gradviz.0.1.0", "2.13.1", "2.13.0.post1"]
    for mine in ["2.13.0+cpu", "2.13.0+gradviz.0.1.0", "2.13.0", "2.0.0a0"]:
        for other in versions:
            for op in ("__lt__", "__le__", "__gt__", "__ge__", "__eq__"):
                expected = getattr(torch_version.TorchVersion(mine), op)(other)
                assert getattr(TorchVersion(mine), op)(other) == expected, (mine, op, other)


def test_script_prints_version(tmp_path):
    script = tmp_path / "v.py"
    script.write_text('import torch\nassert torch.__version__ >= "2.0"\nprint("V", torch.__version__)\n')
    out = subprocess.run([sys.executable, "-m", "gradviz", "run", "--torch", str(script), "-o", str(tmp_path)],
                         capture_output=True, text=True)
    assert f"V {TORCH_API_LEVEL}+gradviz." in out.stdout, out.stdout + out.stderr


# ----- which real torch the torch engine accepts ----------------------------------------------------------------
@pytest.mark.parametrize("version, reason", [
    ("2.13.0+cpu", None),
    ("2.4.0", None),
    ("2.14.1+cu130", None),
    ("2.15.0", None),  # a newer 2.x is tried: what differs is probed, not read off the version
    ("2.3.1", "gradviz's torch engine needs torch 2.4 or later, found torch 2.3.1: "
              "pip install 'torch>=2.4,<=2.15.0'"),
    ("2.4.0a0", "gradviz's torch engine needs torch 2.4 or later, found torch 2.4.0a0: "
                "pip install 'torch>=2.4,<=2.15.0'"),
    ("3.0.0", "gradviz's torch engine is written for torch 2 (2.4 to 2.15.0 tested), found torch 3.0.0: "
              "pip install 'torch>=2.4,<=2.15.0'"),
    ("banana", "torch reports an unreadable version `banana`: pip install 'torch>=2.4,<=2.15.0'"),
])
def test_unsupported_says_why_in_one_line(version, reason):
    from gradviz.tracing.adapters.torch.support import unsupported

    assert unsupported(version) == reason


def _fake_torch(tmp_path, version):
    """A package named torch whose only content is its version, first on the path of a child process."""
    package = tmp_path / "fake" / "torch"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(f"__version__ = {version!r}\n")
    script = tmp_path / "train.py"
    script.write_text("import torch\nx = torch.ones(3, requires_grad=True)\n(x * 2).sum().backward()\n"
                      "print('grad', x.grad.tolist())\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path / "fake"), REPO]))
    return script, env


@pytest.mark.parametrize("engine", ["auto", "torch"])
@pytest.mark.parametrize("version, says", [
    ("2.3.1", "gradviz's torch engine needs torch 2.4 or later, found torch 2.3.1"),
    ("3.0.0", "gradviz's torch engine is written for torch 2 (2.4 to 2.15.0 tested), found torch 3.0.0"),
])
def test_an_unsupported_torch_is_one_line_and_the_report_is_still_written(tmp_path, engine, version, says):
    script, env = _fake_torch(tmp_path, version)
    out_dir = tmp_path / "out"
    run = subprocess.run([sys.executable, "-m", "gradviz", "run", "--engine", engine, "--out", str(out_dir),
                          "--no-render", str(script)], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert run.stderr.splitlines() == [
        f"gradviz: {says}: pip install 'torch>=2.4,<=2.15.0'; meanwhile {script} runs on gradviz's engine "
        "through its `import torch` shim"], run.stderr
    assert run.returncode == 0 and "grad [2.0, 2.0, 2.0]" in run.stdout
    doc = json.loads((out_dir / "report.json").read_text())
    assert doc["engine"]["name"] == "gradviz" and len(doc["backwards"]) == 1
    # the document itself says real PyTorch was not watched: report.json read later must not look like torch's
    assert doc["unseen"] == [{"kind": "engine", "what": "real PyTorch (the script ran on gradviz's engine instead)",
                              "count": 1, "how": f"{says}: pip install 'torch>=2.4,<=2.15.0'", "location": None,
                              "advice": "pip install 'torch>=2.4,<=2.15.0', then run it again"}]
    assert "real PyTorch (the script ran on gradviz's engine instead)" in run.stdout


def test_tracing_an_unsupported_torch_from_python_raises_one_line(tmp_path):
    script, env = _fake_torch(tmp_path, "2.3.1")
    code = ("import gradviz\n"
            "try:\n    gradviz.trace(engine='torch')\n"
            "except ImportError as exc:\n    print(type(exc).__name__, exc)\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert run.stdout.strip() == ("TorchVersionError gradviz's torch engine needs torch 2.4 or later, found torch "
                                  "2.3.1: pip install 'torch>=2.4,<=2.15.0'"), run.stderr
