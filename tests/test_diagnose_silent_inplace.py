"""silent-inplace: a value a live graph saved for backward, changed through `.data` or a numpy array sharing its
memory. Each case runs as a script under gradviz.trace(): code, severity, line, the saving node named — and the
harmless idioms stay silent. The builder's facts are also fed synthetically, as the torch adapter will send them."""

import textwrap

import numpy as np
import pytest

import gradviz
from gradviz.document import load_trace
from gradviz.tracing import validate
from gradviz.tracing.builder import LEAF, OutputFact, SavedFact, TraceBuilder
from gradviz.tracing.frames import Location

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

PRELUDE = "import gradviz as torch\nimport gradviz.nn as nn\ntorch.manual_seed(0)\n"


def run(tmp_path, body):
    """Run PRELUDE + body as a script file under a trace; returns (document, source lines, the script's globals)."""
    source = PRELUDE + textwrap.dedent(body)
    path = tmp_path / "script.py"
    path.write_text(source)
    scope = {"__name__": "__main__", "__file__": str(path)}
    tr = gradviz.trace()
    with tr:
        exec(compile(source, str(path), "exec"), scope)
    return tr.to_dict(), source.splitlines(), scope


def line(lines, marker):
    return next(i for i, text in enumerate(lines, 1) if marker in text)


def silent(doc):
    return [d for d in doc["diagnostics"] if d["code"] == "silent-inplace"]


def only_silent(doc):
    found = silent(doc)
    assert len(found) == 1, [(d["code"], d["message"]) for d in doc["diagnostics"]]
    return found[0]


def node(doc, op):
    return next(n for n in doc["nodes"] if n["op"] == op)


SIGMOID_DATA = """\
x = torch.randn(5, requires_grad=True)
y = torch.sigmoid(x)
y.data.zero_()
y.sum().backward()
"""


def test_zeroing_a_sigmoid_output_through_data_is_an_error_at_that_line(tmp_path):
    doc, lines, scope = run(tmp_path, SIGMOID_DATA)
    assert np.array_equal(scope["x"].grad.numpy(), np.zeros(5))  # silently wrong, as in PyTorch
    d = only_silent(doc)
    sig = node(doc, "SigmoidBackward")
    assert d["severity"] == "error"
    assert d["location"]["line"] == line(lines, "y.data.zero_()")
    assert d["message"] == (
        f"`y.data.zero_()` at line {line(lines, 'y.data.zero_()')} changed `y` (5,) in place through `.data`, "
        f"which has a version counter of its own: SigmoidBackward (n{sig['id']}) at line "
        f"{line(lines, 'torch.sigmoid')} had saved it for backward, and backward at line "
        f"{line(lines, 'backward()')} used the changed values. Nothing raised (PyTorch does not notice either): "
        "the gradients it computed are silently wrong.")
    assert d["hint"].startswith("Don't write through `.data` while a graph still needs the value")
    assert d["nodes"][0] == sig["id"] and d["details"]["saved_by"] == [sig["id"]]
    assert d["details"]["how"] == "data"
    roles = {r["role"]: r["location"]["line"] for r in d["related"]}
    assert roles == {"saved here": line(lines, "torch.sigmoid"), "backward used it here": line(lines, "backward()")}
    assert [x["code"] for x in doc["diagnostics"]] == ["silent-inplace"]


@pytest.mark.oracle
def test_the_engine_computes_the_same_silently_wrong_gradient_as_pytorch():
    torch = pytest.importorskip("torch")
    data = np.linspace(-2, 2, 6).astype(np.float32)
    results = []
    for lib in (gradviz, torch):
        x = lib.tensor(data, requires_grad=True)
        y = lib.sigmoid(x)
        y.data[y.data < 0.5] = 0
        (y * y).sum().backward()
        results.append(x.grad.numpy())
    assert np.allclose(results[0], results[1])
    assert np.count_nonzero(results[0]) == 3  # zero exactly where the output was zeroed


def test_a_data_index_write_and_a_parameter_updated_before_backward(tmp_path):
    doc, lines, _ = run(tmp_path, """\
        p = nn.Parameter(torch.randn(4))
        h = torch.tanh(p)
        h.data[h.data < 0] = 0
        loss = (p ** 2).sum() + h.sum()
        p.data -= 0.1 * torch.ones(4)
        loss.backward()
        """)
    found = {d["location"]["line"]: d for d in silent(doc)}
    assert set(found) == {line(lines, "h.data[h.data < 0] = 0"), line(lines, "p.data -= 0.1")}
    tanh, power = node(doc, "TanhBackward"), node(doc, "PowBackward")
    write_h = found[line(lines, "h.data[")]
    assert write_h["nodes"] == [tanh["id"]] and "`h` (4,) in place through `.data`" in write_h["message"]
    write_p = found[line(lines, "p.data -= 0.1")]
    assert write_p["severity"] == "error"
    assert f"PowBackward (n{power['id']}) at line {line(lines, 'loss = (p ** 2)')} had saved it" in write_p["message"]
    assert "`p` (4,) in place" in write_p["message"]


def test_a_tracked_inplace_change_is_stale_version_not_silent(tmp_path):
    doc, lines, _ = run(tmp_path, """\
        x = torch.randn(5, requires_grad=True)
        y = torch.sigmoid(x)
        y.mul_(2)
        try:
            y.sum().backward()
        except RuntimeError:
            pass
        """)
    assert [d["code"] for d in doc["diagnostics"]] == ["stale-version"]


def test_a_write_into_a_numpy_array_is_reported_where_the_array_was_taken(tmp_path):
    doc, lines, scope = run(tmp_path, """\
        x = torch.randn(6, requires_grad=True)
        y = torch.exp(x)
        arr = y.detach().numpy()
        print(arr.mean())
        arr[:3] = 0
        y.sum().backward()
        """)
    assert np.array_equal(scope["x"].grad.numpy()[:3], np.zeros(3))
    d = only_silent(doc)
    exp = node(doc, "ExpBackward")
    assert d["severity"] == "error"
    assert d["location"]["line"] == line(lines, "arr = y.detach().numpy()")
    assert d["message"] == (
        f"the numpy array taken from `y` (6,) at line {line(lines, 'arr = y')} (`arr = y.detach().numpy()`) shares "
        f"its memory, and it was written between there and backward at line {line(lines, 'backward()')}: "
        f"ExpBackward (n{exp['id']}) at line {line(lines, 'torch.exp')} saved that memory for backward and used "
        "the changed values. numpy writes bypass the version counter, so nothing raised (PyTorch does not notice "
        "either): the gradients are silently wrong.")
    assert d["hint"].startswith("Copy before writing: `.detach().numpy().copy()`")
    assert d["details"]["how"] == "numpy" and d["nodes"] == [exp["id"]]


def test_the_numpy_write_is_blamed_on_the_hand_out_before_it(tmp_path):
    doc, lines, _ = run(tmp_path, """\
        x = torch.randn(6, requires_grad=True)
        y = torch.exp(x)
        first = y.detach().numpy()
        second = y.detach().numpy()
        second[0] = 7.0
        third = y.detach().numpy()
        y.sum().backward()
        """)
    assert only_silent(doc)["location"]["line"] == line(lines, "second = y")


def test_numpy_write_on_a_same_line_hand_out(tmp_path):
    doc, lines, _ = run(tmp_path, """\
        x = torch.randn(6, requires_grad=True)
        y = torch.sigmoid(x)
        y.detach().numpy()[:] = 0
        y.sum().backward()
        """)
    assert only_silent(doc)["location"]["line"] == line(lines, "y.detach().numpy()[:] = 0")


@pytest.mark.parametrize("body", [
    pytest.param("""\
        w = torch.randn(3, requires_grad=True)
        x = torch.randn(8, 3)
        for _ in range(3):
            loss = (torch.tanh(x * w) ** 2).sum()
            loss.backward()
            w.data -= 0.1 * w.grad
            w.grad.zero_()
        """, id="p.data -= lr * p.grad after backward"),
    pytest.param("""\
        model = nn.Linear(3, 2)
        model.weight.data.fill_(0.5)
        model.bias.data[0] = 1.0
        model.bias.data.mul_(0.1)
        loss = torch.tanh(model(torch.randn(4, 3))).sum()
        loss.backward()
        """, id=".data initialisation before any forward"),
    pytest.param("""\
        x = torch.randn(5, requires_grad=True)
        y = torch.sigmoid(x)
        print(y.data.sum(), y.data[0], (y.data > 0.5).sum())
        m = y.data.mean()
        y.sum().backward()
        """, id=".data reads"),
    pytest.param("""\
        x = torch.randn(5, requires_grad=True)
        y = torch.sigmoid(x)
        y.sum().backward()
        y.data.zero_()
        """, id=".data write after the saving graph was freed"),
    pytest.param("""\
        x = torch.randn(5, requires_grad=True)
        y = torch.sigmoid(x)
        y.sum().backward(retain_graph=True)
        y.data.zero_()
        """, id=".data write into a retained graph not backwarded again"),
    pytest.param("""\
        x = torch.randn(5, requires_grad=True)
        y = torch.sigmoid(x)
        z = y + 1
        z.data.zero_()
        y.sum().backward()
        """, id=".data write into a value no node saved"),
    pytest.param("""\
        x = torch.randn(5, requires_grad=True)
        y = torch.sigmoid(x)
        print((y.detach().numpy() > 0.5).mean())
        y.sum().backward()
        """, id="numpy read for a metric"),
    pytest.param("""\
        x = torch.randn(5, requires_grad=True)
        y = torch.sigmoid(x)
        a = y.detach().numpy().copy()
        a[:] = 0
        y.sum().backward()
        """, id="numpy copy written"),
    pytest.param("""\
        x = torch.randn(5, requires_grad=True)
        y = torch.sigmoid(x)
        a = y.detach().numpy()
        y.sum().backward()
        a[:] = 0
        """, id="numpy write after backward"),
])
def test_harmless_idioms_stay_silent(tmp_path, body):
    doc, lines, _ = run(tmp_path, body)
    assert silent(doc) == [], [d["message"] for d in silent(doc)]
    assert [(d["code"], d["message"]) for d in doc["diagnostics"] if d["severity"] == "error"] == []


def test_the_findings_survive_a_round_trip_through_report_json(tmp_path):
    doc, lines, _ = run(tmp_path, SIGMOID_DATA + "a = x.detach() * 1\n")
    path = tmp_path / "report.json"
    path.write_text(__import__("json").dumps(doc))
    loaded = load_trace(path)
    event = next(e for e in loaded["events"] if e.get("silent_saved_by"))
    assert event["silent_backward"] == loaded["backwards"][0]["id"]
    assert gradviz.diagnose.diagnose(loaded) == doc["diagnostics"]


# ----- the facts, fed synthetically (what the torch adapter will send) -----------------------------------------------
LOC_FWD = Location("train.py", 10, "<module>", "y = x.sigmoid()")
LOC_DATA = Location("train.py", 11, "<module>", "y.data.zero_()")
LOC_NUMPY = Location("train.py", 12, "<module>", "a = y.detach().numpy()")
LOC_BACKWARD = Location("train.py", 13, "<module>", "y.sum().backward()")


def _sigmoid_graph(builder, storage="mem-y"):
    builder.variable("x", "new", (3,), "float32", 12, True, None)
    builder.op("n1", "SigmoidBackward0", "Sigmoid", False, [("x", LEAF)], ["x"],
               [OutputFact("y", (3,), "float32", 12, True, False, None, None, None)],
               [SavedFact(None, "output", 0, (3,), 12, 0, "vc-y", "mem-y", 12, None, storage)], LOC_FWD)
    builder.variable("y.data", "data", (3,), "float32", 12, False, LOC_DATA)
    builder.cut("y", "data", LOC_DATA, "y.data")


def _backward(builder):
    builder.backward_begin(["y"], ["n1"], LOC_BACKWARD, retain_graph=None)
    builder.backward_step("n1", 1.0)
    builder.accumulate("x", 1.0)
    builder.buffers_freed("n1")
    builder.backward_end(None)


def test_builder_a_write_on_saved_memory_under_another_counter_is_silent():
    b = TraceBuilder()
    _sigmoid_graph(b)
    b.inplace("y.data", 0, 1, "vc-y.data", LOC_DATA, op="FillBackward0", storage="mem-y")
    _backward(b)
    b.stop()
    doc = b.document()
    validate(doc)
    (event,) = [e for e in doc["events"] if e["kind"] == "inplace"]
    assert event["saved_by"] == [] and event["silent_saved_by"] == [0] and event["silent_backward"] == 0
    (d,) = doc["diagnostics"]
    assert (d["code"], d["location"]["line"], d["nodes"]) == ("silent-inplace", 11, [0])
    assert "SigmoidBackward0 (n0) at line 10 had saved it" in d["message"]


def test_builder_the_same_counter_is_a_stale_version_and_no_storage_is_no_finding():
    b = TraceBuilder()
    _sigmoid_graph(b)
    b.inplace("y", 0, 1, "vc-y", LOC_DATA, op="MulBackward0", storage="mem-y")  # tracked: y's own counter
    b.inplace("y.data", 0, 1, "vc-y.data", LOC_DATA, op="FillBackward0")  # an adapter that sends no storage
    (tracked, untold) = [e for e in b.events.values() if e["kind"] == "inplace"]
    assert tracked["saved_by"] == [0] and "silent_saved_by" not in tracked
    assert untold["saved_by"] == [] and "silent_saved_by" not in untold


def test_builder_the_saver_indexes_list_live_unfreed_nodes_in_the_order_they_saved():
    # the indexes are filled when read: a node freed before anyone reads them never shows, and a node that saves
    # again (an in-place op re-points what it saved) moves to the end, as if each fact had been indexed at once
    b = TraceBuilder()
    b.variable("x", "new", (3,), "float32", 12, True, None)
    for n in ("n1", "n2", "n3"):
        b.op(n, "SigmoidBackward0", "Sigmoid", False, [("x", LEAF)], ["x"],
             [OutputFact("y" + n, (3,), "float32", 12, True, False, None, None, None)],
             [SavedFact(None, "output", 0, (3,), 12, 0, "vc-x", "mem-" + n, 12, None, "mem-x")], LOC_FWD)
    ids = {n: b.live_nodes[n].id for n in ("n1", "n2", "n3")}
    b.buffers_freed("n2")
    b.node_saved("n1", [SavedFact(None, "output", 0, (3,), 12, 1, "vc-x", "mem-n1", 12, None, "mem-x")])
    assert list(b.saved_counters) == ["vc-x"] and list(b.saved_storages) == ["mem-x"]
    assert list(b.saved_counters["vc-x"]) == [ids["n3"], ids["n1"]]  # n1 saved again: last; n2 freed: gone
    assert list(b.saved_storages["mem-x"]) == [ids["n3"], ids["n1"]]
    b.node_died("n3")
    b.buffers_freed("n1")
    assert b.saved_counters == {} and b.saved_storages == {}


def test_builder_ten_field_saved_facts_still_work_and_a_freed_saver_is_not_watched():
    b = TraceBuilder()
    _sigmoid_graph(b, storage=None)
    assert b.saved_storages == {}
    b2 = TraceBuilder()
    _sigmoid_graph(b2)
    assert set(b2.saved_storages) == {"mem-y"}
    _backward(b2)
    assert b2.saved_storages == {}
    b2.inplace("y.data", 0, 1, "vc-y.data", LOC_DATA, op="FillBackward0", storage="mem-y")
    assert "silent_saved_by" not in list(b2.events.values())[-1]


def test_builder_numpy_hand_out_and_write():
    b = TraceBuilder()
    _sigmoid_graph(b)
    assert b.numpy_handout("y.data", "elsewhere", LOC_NUMPY) is None  # memory nobody saved: nothing to watch
    token = b.numpy_handout("y.data", "mem-y", LOC_NUMPY)
    b.backward_begin(["y"], ["n1"], LOC_BACKWARD, retain_graph=None)
    b.backward_step("n1", 1.0)
    b.numpy_write(token, "n1")  # the adapter compared its copy with the saved value: changed
    b.numpy_write(token, "n1")  # told twice: one event
    b.numpy_handout_done(token)
    b.buffers_freed("n1")
    b.backward_end(None)
    b.stop()
    doc = b.document()
    validate(doc)
    (event,) = [e for e in doc["events"] if e["kind"] == "numpy_write"]
    assert event["saved_by"] == [0] and event["backward"] == 0 and event["location"]["line"] == 12
    (d,) = doc["diagnostics"]
    assert (d["code"], d["location"]["line"], d["details"]["how"]) == ("silent-inplace", 12, "numpy")


def test_a_data_write_beside_the_saved_part_of_the_memory_is_harmless(tmp_path):
    doc, lines, _ = run(tmp_path, """\
        base = torch.randn(6)
        w = torch.randn(3, requires_grad=True)
        y = base[:3] * w
        base.data[4:] = 0
        y.sum().backward()
        y2 = base[:3] * w
        base.data[:2] = 0
        y2.sum().backward()
        """)
    (d,) = silent(doc)
    assert d["location"]["line"] == line(lines, "base.data[:2] = 0")


def test_a_long_loop_reports_each_line_once_and_misleads_no_other_rule(tmp_path):
    doc, lines, _ = run(tmp_path, """\
        model = nn.Linear(4, 4)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        for step in range(30):
            h = torch.sigmoid(model(torch.randn(8, 4)))
            arr = h.detach().numpy()
            arr[:, 0] = 0
            h.data.clamp_(max=0.9)
            loss = (h ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        """)
    found = {(d["code"], d["location"]["line"]): d for d in doc["diagnostics"]}
    assert set(found) == {("silent-inplace", line(lines, "arr = h.detach()")),
                          ("silent-inplace", line(lines, "h.data.clamp_"))}
    for d in found.values():  # iterations outside the window are named by the backward's line all the same
        assert f"backward at line {line(lines, 'loss.backward()')}" in d["message"] and d["count"] > 3
