"""The README's Python quickstart runs as written and says what the README claims."""

import json
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


def quickstart_commands():
    """``(command, exit status)`` for each line of the README's shell Quickstart, the status from its comment."""
    section = README.read_text().split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```sh\n(.*?)```", section, flags=re.S)
    commands = []
    for line in block.strip().splitlines():
        command, _, comment = line.partition("#")
        commands.append((command.split(), int(re.search(r"\(exit (\d)", comment).group(1))))
    return commands


def test_the_shell_quickstart_runs_as_written(tmp_path):
    """Every command of the Quickstart, from a folder laid out as a clone is (samples/ beside it), with the exit
    status its comment says; what each one claims is checked where it is cheap to."""
    pytest.importorskip("torch")  # two lines run a plain PyTorch script on real PyTorch
    gradviz = Path(sys.executable).parent / "gradviz"
    if not gradviz.exists():
        pytest.skip("the gradviz console script is not installed")
    (tmp_path / "samples").symlink_to(README.parent / "samples")
    commands = quickstart_commands()
    assert len(commands) == 7
    for words, status in commands:
        assert words[0] == "gradviz"
        out = subprocess.run([str(gradviz), *words[1:]], cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert out.returncode == status, (words, out.stderr[-2000:])
        assert "gradviz: error" not in out.stderr, words
    assert "retained-graph" in (tmp_path / "gradviz-out" / "loss_accumulation_leak" / "report.json").read_text()
    sarif = (tmp_path / "findings.sarif").read_text()
    assert '"ruleId": "none-grad"' in sarif and '"ruleId": "optimize-non-leaf"' in sarif
    assert (tmp_path / "graph.svg").read_text().lstrip().startswith(("<?xml", "<svg"))
    # the folder holds the last run of that script: the --engine gradviz one
    report = (tmp_path / "gradviz-out" / "torch_script_unmodified" / "report.json").read_text()
    assert json.loads(report)["engine"]["name"] == "gradviz"
