"""The trace document: JSON round trip, and one-line errors naming the first bad field on load."""

import copy
import json

import pytest

import gradviz
from gradviz.tracing import TraceFormatError, load_trace, validate


@pytest.fixture(scope="module")
def doc():
    w = gradviz.randn(3, requires_grad=True)
    with gradviz.trace() as tr:
        h = w * 2
        h.add_(1)
        y = h.exp().sum()
        assert h.grad is None
        y.backward()
        for bad in (gradviz.tensor([0.0], requires_grad=True),):
            (bad.sqrt() * 0).sum().backward()  # an infinite gradient: norms that JSON cannot hold as numbers
    return tr.to_dict()


def test_round_trip_gives_the_same_document(doc, tmp_path):
    path = tmp_path / "trace.json"
    with open(path, "w") as f:
        json.dump(doc, f, allow_nan=False)
    loaded = load_trace(path)
    assert loaded == json.loads(json.dumps(doc)) and loaded.to_dict() is loaded
    assert loaded["format"] == "gradviz-trace" and loaded["version"] == 1


def test_to_json_writes_strict_json_with_nonfinite_norms_as_strings(tmp_path):
    x = gradviz.tensor([0.0, 4.0], requires_grad=True)
    with gradviz.trace() as tr:
        x.sqrt().sum().backward()
    path = tr.to_json(tmp_path / "t.json")
    def refuse(constant):
        raise AssertionError(f"non-standard JSON constant {constant}")

    json.loads(path.read_text(), parse_constant=refuse)
    norms = load_trace(path)["backwards"][0]["leaf_grad_norms"]
    assert list(norms.values()) == ["inf"]


def test_document_kinds_are_all_present(doc):
    kinds = {e["kind"] for e in doc["events"]}
    assert {"inplace", "grad_read"} <= kinds
    validate(json.loads(json.dumps(doc)))


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d["nodes"][1].__setitem__("op", 5), "nodes[1].op: expected a string"),
    (lambda d: d["variables"][0].pop("shape"), "variables[0].shape: missing"),
    (lambda d: d["variables"][0].__setitem__("shape", [2, "3"]), "variables[0].shape[1]: expected an integer"),
    (lambda d: d["variables"][0].__setitem__("requires_grad", 1), "variables[0].requires_grad: expected true or false"),
    (lambda d: d.__setitem__("format", "other"), 'format: expected "gradviz-trace", got "other"'),
    (lambda d: d.pop("format"), 'format: expected "gradviz-trace", got null'),
    (lambda d: d.__setitem__("version", 2), "version: unsupported version 2 (this gradviz reads version 1)"),
    (lambda d: d.__setitem__("nodes", {}), "nodes: expected a list"),
    (lambda d: d["nodes"][0].__setitem__("location", {"file": "x.py", "line": "3", "text": ""}),
     "nodes[0].location.line: expected an integer"),
    (lambda d: d["backwards"][0]["grad_norms"].__setitem__("0", "big"), "backwards[0].grad_norms.0: expected a number"),
    (lambda d: d["events"][0].pop("saved_by"), "events[0].saved_by: missing"),
    (lambda d: d["memory"].__setitem__("peak_retained_bytes", None), "memory.peak_retained_bytes: expected an integer"),
    (lambda d: d["diagnostics"].append({"code": "x", "severity": "fatal", "message": "m"}),
     "diagnostics[0].severity: expected one of error, warning, info"),
])
def test_first_bad_field_is_named_in_one_line(doc, tmp_path, mutate, message):
    broken = json.loads(json.dumps(doc))
    broken["diagnostics"] = []
    assert broken["events"][0]["kind"] == "inplace"
    mutate(broken)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(broken))
    with pytest.raises(TraceFormatError) as info:
        load_trace(path)
    assert str(info.value) == message and "\n" not in str(info.value)


def test_not_json_and_not_an_object(tmp_path):
    path = tmp_path / "x.json"
    path.write_text("{'format': 1}")
    with pytest.raises(TraceFormatError, match=r"x\.json: not JSON \(Expecting property name .* line 1 column 2\)"):
        load_trace(path)
    path.write_text("[1, 2]")
    with pytest.raises(TraceFormatError, match="^document: expected a JSON object at the top level$"):
        load_trace(path)
    path.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(TraceFormatError, match="not a text file"):
        load_trace(path)


def test_loading_never_evaluates_anything(doc, tmp_path):
    hostile = copy.deepcopy(json.loads(json.dumps(doc)))
    hostile["script"] = "__import__('os').system('false')"
    hostile["nodes"][0]["meta"] = {"__reduce__": "os.system"}
    path = tmp_path / "h.json"
    path.write_text(json.dumps(hostile))
    loaded = load_trace(path)
    assert loaded["script"] == "__import__('os').system('false')" and loaded["nodes"][0]["meta"]["__reduce__"]


def test_snapshot_document_validates():
    from gradviz.tracing import snapshot

    w = gradviz.randn(2, 2, requires_grad=True)
    out = (w @ w).tanh().sum()
    validate(json.loads(json.dumps(snapshot(out))))
