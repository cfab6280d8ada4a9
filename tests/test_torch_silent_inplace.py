"""silent-inplace on real PyTorch: the torch adapter's storage facts (SavedFact.storage, in-place writes on saved
memory under another version counter, numpy hand-outs) give the same findings, at the same lines, with the same
messages, as gradviz's engine; the harmless idioms stay silent on both."""

import re
import textwrap

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import gradviz  # noqa: E402

from .test_torch_parity import to_torch  # noqa: E402

pytestmark = [pytest.mark.oracle, pytest.mark.filterwarnings("ignore::UserWarning")]
PRELUDE = "import gradviz as torch\nimport gradviz.nn as nn\ntorch.manual_seed(0)\n"


def run(tmp_path, body, engine):
    """PRELUDE + body as a script, on gradviz's engine or (imports pointed at torch) on real PyTorch."""
    source = PRELUDE + textwrap.dedent(body)
    if engine == "torch":
        source = to_torch(source)
    path = tmp_path / f"script_{engine}.py"
    path.write_text(source)
    scope = {"__name__": "__main__", "__file__": str(path)}
    tr = gradviz.trace(engine=engine)
    with tr:
        exec(compile(source, str(path), "exec"), scope)
    return tr.to_dict(), source.splitlines(), scope


def line(lines, marker):
    return next(i for i, text in enumerate(lines, 1) if marker in text)


def findings(doc):
    """(code, severity, line, message) of every diagnostic; node ids and PyTorch's name suffix left out."""
    return [(d["code"], d["severity"], (d.get("location") or {}).get("line"),
             re.sub(r"Backward\d+ ", "Backward ", re.sub(r"\(n\d+\)", "(n)", d["message"])))
            for d in doc["diagnostics"]]


def silent(doc):
    return [d for d in doc["diagnostics"] if d["code"] == "silent-inplace"]


def node(doc, op):
    return next(n for n in doc["nodes"] if n["op"].rstrip("0123456789") == op)  # PyTorch: SigmoidBackward0


def test_a_sigmoid_output_zeroed_through_data_gives_zero_gradients_and_is_reported(tmp_path):
    # the PyTorch issue: the input's gradient is all zeros, and nothing raises
    body = """\
        x = torch.randn(5, requires_grad=True)
        y = torch.sigmoid(x)
        y.data.zero_()
        y.sum().backward()
        """
    doc, lines, scope = run(tmp_path, body, "torch")
    assert np.array_equal(scope["x"].grad.numpy(), np.zeros(5))
    (d,) = doc["diagnostics"]
    sig = node(doc, "SigmoidBackward")
    assert (d["code"], d["severity"], d["location"]["line"]) == ("silent-inplace", "error",
                                                                 line(lines, "y.data.zero_()"))
    assert d["nodes"] == [sig["id"]] and d["details"]["how"] == "data"
    assert f"{sig['op']} (n{sig['id']}) at line {line(lines, 'torch.sigmoid')} had saved it" in d["message"]
    assert findings(doc) == findings(run(tmp_path, body, "gradviz")[0])


def test_a_numpy_write_is_reported_at_the_hand_out_line(tmp_path):
    body = """\
        x = torch.randn(6, requires_grad=True)
        y = torch.exp(x)
        arr = y.detach().numpy()
        print(arr.mean())
        arr[:3] = 0
        y.sum().backward()
        """
    doc, lines, scope = run(tmp_path, body, "torch")
    assert np.array_equal(scope["x"].grad.numpy()[:3], np.zeros(3))
    (d,) = doc["diagnostics"]
    assert (d["code"], d["location"]["line"]) == ("silent-inplace", line(lines, "arr = y.detach().numpy()"))
    assert d["details"]["how"] == "numpy" and d["nodes"] == [node(doc, "ExpBackward")["id"]]
    assert f"written between there and backward at line {line(lines, 'backward()')}" in d["message"]
    assert findings(doc) == findings(run(tmp_path, body, "gradviz")[0])


def test_a_numpy_write_through_x_numpy_on_a_tensor_that_needs_no_grad(tmp_path):
    body = """\
        x = torch.randn(4)
        w = torch.randn(4, requires_grad=True)
        y = (x * w).sum()
        x.numpy()[:] = 0
        y.backward()
        """
    doc, lines, scope = run(tmp_path, body, "torch")
    assert np.array_equal(scope["w"].grad.numpy(), np.zeros(4))  # MulBackward read the zeroed x
    assert [(d["code"], d["location"]["line"]) for d in doc["diagnostics"]] == [
        ("silent-inplace", line(lines, "x.numpy()[:] = 0"))]
    assert findings(doc) == findings(run(tmp_path, body, "gradviz")[0])


def test_a_write_through_another_tensor_on_the_memory_is_told_apart_by_its_version(tmp_path):
    # not a .data: the written tensor's version counter differs from the saved output's (its _version moved,
    # the output's did not), so PyTorch does not notice
    body = """\
        x = torch.randn(5, requires_grad=True)
        y = torch.sigmoid(x)
        alias = torch.empty(0).set_(y.untyped_storage(), 0, (5,), (1,))
        alias.zero_()
        y.sum().backward()
        """
    doc, lines, scope = run(tmp_path, body, "torch")
    assert np.array_equal(scope["x"].grad.numpy(), np.zeros(5))
    (d,) = doc["diagnostics"]
    assert (d["code"], d["location"]["line"]) == ("silent-inplace", line(lines, "alias.zero_()"))
    assert "shares its memory but not its version counter" in d["message"]
    assert d["nodes"] == [node(doc, "SigmoidBackward")["id"]]


def test_np_asarray_is_a_hand_out_too(tmp_path):
    body = """\
        import numpy as np
        x = torch.randn(6, requires_grad=True)
        y = torch.tanh(x)
        a = np.asarray(y.detach())
        a[1:] = 0.5
        y.sum().backward()
        """
    doc, lines, _ = run(tmp_path, body, "torch")
    assert [(d["code"], d["location"]["line"]) for d in doc["diagnostics"]] == [
        ("silent-inplace", line(lines, "a = np.asarray"))]
    assert findings(doc) == findings(run(tmp_path, body, "gradviz")[0])


@pytest.mark.parametrize("body", [
    pytest.param("""\
        p = nn.Parameter(torch.randn(4))
        h = torch.tanh(p)
        h.data[h.data < 0] = 0
        loss = (p ** 2).sum() + h.sum()
        p.data -= 0.1 * torch.ones(4)
        loss.backward()
        """, id="a .data index write and a parameter updated before backward"),
    pytest.param("""\
        x = torch.randn(6, requires_grad=True)
        y = torch.exp(x)
        first = y.detach().numpy()
        second = y.detach().numpy()
        second[0] = 7.0
        third = y.detach().numpy()
        y.sum().backward()
        """, id="the numpy write blamed on the hand-out before it"),
    pytest.param("""\
        x = torch.randn(6, requires_grad=True)
        y = torch.sigmoid(x)
        y.detach().numpy()[:] = 0
        y.sum().backward()
        """, id="a numpy write on a same-line hand-out"),
    pytest.param("""\
        base = torch.randn(6)
        w = torch.randn(3, requires_grad=True)
        y = base[:3] * w
        base.data[4:] = 0
        y.sum().backward()
        y2 = base[:3] * w
        base.data[:2] = 0
        y2.sum().backward()
        """, id="a write beside the saved part of the memory, then onto it"),
    pytest.param("""\
        x = torch.randn(5, requires_grad=True)
        y = torch.sigmoid(x)
        y.mul_(2)
        try:
            y.sum().backward()
        except RuntimeError:
            pass
        """, id="a tracked in-place change: stale-version, not silent"),
    pytest.param("""\
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
        """, id="a training loop writing through numpy and .data every step"),
])
def test_the_same_findings_as_on_gradviz_engine(tmp_path, body):
    # codes, severities and lines (the messages name the written tensor as each engine sees it: PyTorch's
    # `base.data[:2] = 0` writes into `base.data`, gradviz's engine into a view it makes for the index)
    doc, lines, _ = run(tmp_path, body, "torch")
    expected = [f[:3] for f in findings(run(tmp_path, body, "gradviz")[0])]
    assert expected, "the scenario must find something on gradviz's engine"
    assert [f[:3] for f in findings(doc)] == expected


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
    pytest.param("""\
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            loss = torch.tanh(model(torch.randn(8, 4))).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        """, id="an optimizer's in-place updates"),
])
def test_harmless_idioms_stay_silent_on_pytorch(tmp_path, body):
    doc, _, _ = run(tmp_path, body, "torch")
    assert silent(doc) == [], [d["message"] for d in silent(doc)]
    assert [d for d in doc["diagnostics"] if d["severity"] == "error"] == []


def test_saved_facts_carry_the_storage_even_for_a_parameter():
    from gradviz.tracing.adapters.torch.engine import TorchAdapter
    from gradviz.tracing.builder import TraceBuilder

    builder = TraceBuilder()
    adapter = TorchAdapter(builder)
    adapter.attach()
    try:
        w = torch.nn.Parameter(torch.randn(3))
        y = torch.tanh(w * torch.randn(3, requires_grad=True))  # MulBackward0 saves the parameter
        y2 = torch.sigmoid(y)
        view = y.detach()[1:]
        with adapter.lock:
            key = adapter.var(w)
            storages = set(builder.saved_storages)
    finally:
        adapter.detach()
    w_storage = (w.device.type, w.get_device(), w.untyped_storage().data_ptr())
    y_storage = (y.device.type, y.get_device(), y.untyped_storage().data_ptr())
    assert w_storage in storages  # the parameter's memory is not charged, and its storage is still known
    assert y_storage in storages
    assert view.untyped_storage().data_ptr() == y_storage[2]  # a view and .detach() share the key
    assert key == id(w) and y2 is not None


def test_a_watched_node_that_dies_without_backward_lets_its_memory_go():
    import gc
    import weakref

    from gradviz.tracing.adapters.torch.engine import TorchAdapter
    from gradviz.tracing.builder import TraceBuilder

    builder = TraceBuilder()
    adapter = TorchAdapter(builder)
    adapter.attach()
    try:
        x = torch.randn(1000, requires_grad=True)
        y = torch.exp(x)
        arr = y.detach().numpy()
        watched = len(adapter._watch)
        storage = weakref.ref(y.untyped_storage())
        ptr = y.untyped_storage().data_ptr()
        del y, arr
        gc.collect()
        left = dict(adapter._watch), dict(builder.versions.handouts)
    finally:
        adapter.detach()
    assert watched == 1  # ExpBackward saved y's memory
    assert left == ({}, {})  # its death released the copy, the storage view and the builder's token
    assert storage() is None or storage().data_ptr() != ptr
