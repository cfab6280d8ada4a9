"""Every sample reproduces its seed situation: run under gradviz.trace(), it reports exactly the expected codes.

The plain-PyTorch sample (`"torch": true`) needs `gradviz run --torch`; the CLI tests run it.
"""

import json
import runpy
import sys
from pathlib import Path

import pytest

import gradviz

pytestmark = pytest.mark.filterwarnings("ignore:The .grad attribute:UserWarning")

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
EXPECTED = json.loads((SAMPLES / "expected.json").read_text())


def run_sample(name, monkeypatch):
    """Run samples/<name> as __main__ under a trace; returns (document, exit status)."""
    path = SAMPLES / name
    monkeypatch.setattr(sys, "argv", [str(path)])
    monkeypatch.syspath_prepend(str(SAMPLES))
    status = 0
    tr = gradviz.trace()
    try:
        with tr:  # the exception passes through the trace, which records what ended the script (as `gradviz run`)
            runpy.run_path(str(path), run_name="__main__")
    except SystemExit as exc:
        status = exc.code or 0
    except Exception:
        status = 1
    return tr.to_dict(), status


def test_every_sample_is_listed():
    on_disk = {p.name for p in SAMPLES.glob("*.py")}
    assert on_disk == set(EXPECTED)
    readme = (SAMPLES / "README.md").read_text()
    for name in EXPECTED:
        assert f"`{name}`" in readme


@pytest.mark.parametrize("name", sorted(n for n, e in EXPECTED.items() if not e["torch"]))
def test_sample_reports_expected_codes(name, monkeypatch, capsys):
    doc, status = run_sample(name, monkeypatch)
    expected = EXPECTED[name]
    assert doc["internal_errors"] == []
    codes = sorted(d["code"] for d in doc["diagnostics"])
    assert codes == sorted(expected["codes"]), [(d["code"], d["message"]) for d in doc["diagnostics"]]
    assert status == expected["exit"]
    source = (SAMPLES / name).read_text()
    assert source.startswith('"""'), "each sample opens with a docstring saying what it shows"
    for code in expected["codes"]:
        assert code in source.split('"""')[1], f"{name}'s docstring names {code}"


def _line(name, marker):
    """The line of ``marker`` in the sample's code (after its docstring, which quotes the same lines)."""
    lines = (SAMPLES / name).read_text().splitlines()
    body = next(i for i, text in enumerate(lines[1:], 2) if '"""' in text)
    return next(i for i, text in enumerate(lines, 1) if i > body and marker in text)


def _by_code(doc):
    return {d["code"]: d for d in doc["diagnostics"]}


def test_variable_trick_is_two_graphs_bridged_by_hand(monkeypatch, capsys):
    doc, _ = run_sample("seed_variable_trick.py", monkeypatch)
    cut = _by_code(doc)["graph-cut"]
    assert cut["severity"] == "info"
    assert cut["location"]["line"] == _line("seed_variable_trick.py", "v = Variable(y1.data")
    assert cut["details"]["bridged"] is True
    names = {doc["variables"][v]["name"] for v in cut["variables"] if v < len(doc["variables"])}
    assert {"y1", "v"} <= names
    roles = {r["role"]: r["location"]["line"] for r in cut["related"]}
    assert roles["gradient carried across here"] == _line("seed_variable_trick.py", "y1.backward(v.grad)")


def test_nonscalar_seed_links_the_none_read(monkeypatch, capsys):
    doc, _ = run_sample("seed_backward_nonscalar.py", monkeypatch)
    found = _by_code(doc)
    none, nonscalar = found["none-grad"], found["nonscalar-backward"]
    line = _line("seed_backward_nonscalar.py", "y1.backward(y1.grad)")
    assert none["location"]["line"] == nonscalar["location"]["line"] == line
    assert (none["severity"], nonscalar["severity"]) == ("warning", "error")
    assert nonscalar["links"] == [none["id"]] and none["links"] == [nonscalar["id"]]
    y1 = none["variables"][0]
    assert doc["variables"][y1]["name"] == "y1"
    assert none["nodes"] == [doc["variables"][y1]["node"]]
    assert doc["nodes"][none["nodes"][0]]["op"] == "ConvolutionBackward"
    assert none["details"]["why_none"]["cause"] == "non-leaf"
    assert "retain_grad()" in none["hint"] and none["hint"].endswith("(gradviz explain none-grad)")


def test_hook_answer_retains_growing_memory(monkeypatch, capsys):
    doc, _ = run_sample("seed_hook_retain_graph.py", monkeypatch)
    retained = _by_code(doc)["retained-graph"]
    assert retained["severity"] == "warning"
    assert retained["location"]["line"] == _line("seed_hook_retain_graph.py", "running_loss += loss")
    roles = {r["role"]: r["location"]["line"] for r in retained["related"]}
    assert roles["retain_graph=True here"] == _line("seed_hook_retain_graph.py", "retain_graph=True)")
    series = [bytes_ for _, bytes_, _ in retained["details"]["series"]]
    assert len(series) >= 29 and series[-1] > 10 * max(series[0], 1)
    assert all(b >= a for a, b in zip(series, series[1:]))


def test_frozen_cnn_saves_buffers_for_the_last_layer_only(monkeypatch, capsys):
    doc, _ = run_sample("freeze_pretrained_cnn.py", monkeypatch)
    training = [n for n in doc["nodes"] if n["iteration"] >= 3 and n["op"] != "AccumulateGrad"]
    assert training
    saving = [n for n in training if n["saved"]]
    assert saving and all(not any(m.startswith("model.features") for m in n["module"]) for n in saving)
    # the last layer's matmul is the only op of the model that saved anything
    model_ops = {n["op"] for n in saving if n["module"] and n["module"][0] == "model"}
    assert model_ops == {"AddmmBackward"}


@pytest.mark.parametrize("name,marker,saver", [
    ("inplace_saved_tensor.py", "hidden *= mask", "torch.sigmoid("),
    ("inplace_view.py", "top.clamp_(", "layer(x).exp()"),
])
def test_inplace_samples_name_both_lines(name, marker, saver, monkeypatch, capsys):
    doc, _ = run_sample(name, monkeypatch)
    stale = _by_code(doc)["stale-version"]
    assert stale["severity"] == "error"
    assert stale["location"]["line"] == _line(name, marker)
    roles = {r["role"]: r["location"]["line"] for r in stale["related"]}
    assert roles["saved here"] == _line(name, saver)
    assert roles["backward failed here"] == _line(name, "loss.backward()")
    assert (stale["details"]["saved_version"], stale["details"]["new_version"]) == (0, 1)


def test_loss_accumulation_names_the_line(monkeypatch, capsys):
    doc, _ = run_sample("loss_accumulation_leak.py", monkeypatch)
    retained = _by_code(doc)["retained-graph"]
    assert retained["location"]["line"] == _line("loss_accumulation_leak.py", "total_loss += loss")
    assert "total_loss += loss" in retained["message"]
    assert all(doc["nodes"][n]["op"] == "AddBackward" for n in retained["nodes"] if n < len(doc["nodes"])
               and doc["nodes"][n]["id"] == n)
