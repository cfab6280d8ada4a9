"""torch.__version__ under the shim: a TorchVersion that says it is gradviz and compares as a version."""

import subprocess
import sys

import pytest

from gradviz import _version
from gradviz.cli.torch_shim import TorchShim, exposed_names
from gradviz.torch_version import TorchVersion
from gradviz.version import TORCH_API_LEVEL


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
