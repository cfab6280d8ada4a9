"""Running a script the way a user does for the silent-training-bug tests: ``gradviz run`` in its default mode
(light iterations), on real PyTorch or on gradviz's engine, and the report it wrote."""

import json
from pathlib import Path

from click.testing import CliRunner

from gradviz.cli import main

SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def run(script, out, engine="torch", *options):
    """``gradviz run --engine ENGINE --no-render --fail-on never [options] SCRIPT``: (report.json, CLI result)."""
    args = ["run", "--engine", engine, "--no-render", "--fail-on", "never", "-q", "--out", str(out), *options,
            str(script)]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    doc = json.loads((Path(out) / "report.json").read_text())
    assert doc["internal_errors"] == []
    return doc


def found(doc, code):
    return [d for d in doc["diagnostics"] if d["code"] == code]


def line_of(path, marker):
    """The line of ``marker`` in ``path``'s code, after its docstring (which may quote the same line)."""
    lines = Path(path).read_text().splitlines()
    body = next((i for i, text in enumerate(lines[1:], 2) if '"""' in text), 0) if lines[0].startswith('"""') else 0
    return next(i for i, text in enumerate(lines, 1) if i > body and marker in text)


def light_schedule(doc):
    """The schedule's full ranges: the run was in the default (light) mode and most iterations were light."""
    schedule = doc["schedule"]
    assert schedule["mode"] == "light" and schedule["light_iterations"] > 0
    return schedule["full"]
