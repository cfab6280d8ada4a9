"""The README's Python quickstart runs as written and says what the README claims."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def quickstart():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) == 1, "the README has one Python quickstart"
    return blocks[0]


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot program is not installed")
def test_python_quickstart_runs_and_explains_the_none_grad(tmp_path):
    script = tmp_path / "quickstart.py"
    script.write_text(quickstart())
    out = subprocess.run([sys.executable, "-W", "ignore", str(script)], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "None"  # y1.grad
    assert lines[1].startswith("none-grad 11 `y1.grad` is None: `y1` (4, 5) is not a leaf")
    assert "is not a leaf" in lines[2] and "retain_grad()" in lines[2]
    assert (tmp_path / "graph.svg").read_text().lstrip().startswith(("<?xml", "<svg"))


def test_readme_test_command_is_what_ci_runs():
    command = ("python3 -m venv .venv && .venv/bin/pip install -q -e '.[test,oracle]' && "
               ".venv/bin/ruff check gradviz tests benchmarks && .venv/bin/python -m pytest -n 2")  # lint, then test
    assert command in README.read_text()
    assert command in (README.parent / ".ci" / "run").read_text()
