"""``gradviz run samples/<each>.py`` end to end: the report, the expected diagnostics, the files, the exit status.

The plain-PyTorch sample runs with ``--torch`` as its entry in samples/expected.json says.
"""

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import gradviz
from gradviz.cli import main

pytestmark = pytest.mark.filterwarnings("ignore:The .grad attribute:UserWarning")

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
EXPECTED = json.loads((SAMPLES / "expected.json").read_text())


def run_sample(name, out, *options):
    expected = EXPECTED[name]
    args = ["run", *options, "--out", str(out)] + (["--torch"] if expected["torch"] else []) + [str(SAMPLES / name)]
    return CliRunner(env={"COLUMNS": "250"}).invoke(main, args, catch_exceptions=False)


@pytest.mark.parametrize("name", sorted(n for n, e in EXPECTED.items() if "ranks" not in e))  # DDP ones: test_ddp_torch
def test_sample_through_the_cli(name, tmp_path):
    result = run_sample(name, tmp_path, "--no-render", "--fail-on", "never")
    expected = EXPECTED[name]
    assert result.exit_code == expected["exit"], result.stderr
    doc = json.loads((tmp_path / "report.json").read_text())
    assert sorted(d["code"] for d in doc["diagnostics"]) == sorted(expected["codes"])
    for code in set(expected["codes"]):
        assert code in result.stdout
    # the report's first line is the verdict
    verdict = next(line for line in result.stdout.splitlines() if line.startswith("gradviz"))
    mistakes = [d for d in doc["diagnostics"] if d["severity"] != "info"]
    if mistakes:
        assert verdict.startswith(f"gradviz: {len(mistakes)} mistake"), verdict
    else:
        assert verdict.startswith("gradviz: no mistakes seen in "), verdict
    assert result.stdout.endswith(f"files to {tmp_path}/\n  report.json\n  report.html\n")
    if expected["exit"]:
        assert result.stderr.startswith("Traceback (most recent call last):\n")
        # only the sample's own frames: none from gradviz's package (the checkout's own folder may be named gradviz)
        assert os.path.dirname(os.path.abspath(gradviz.__file__)) + os.sep not in result.stderr
    else:
        assert "Traceback" not in result.stderr


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot program is not installed")
def test_torch_sample_writes_pictures_json_and_html(tmp_path):
    result = run_sample("torch_script_unmodified.py", tmp_path)
    assert result.exit_code == 1
    written = [line.split()[0] for line in result.stdout.split(f"files to {tmp_path}/\n")[1].splitlines()]
    pictures = [p for p in written if p.endswith(".svg")]
    assert pictures == ["structure-0-iter0.svg", "structure-1-iter0.svg", "structure-2-iter1.svg"]
    assert all((tmp_path / p).read_text().lstrip().startswith(("<?xml", "<svg")) for p in pictures)
    assert written[-2:] == ["report.json", "report.html"]
    assert "<svg" in (tmp_path / "report.html").read_text()
