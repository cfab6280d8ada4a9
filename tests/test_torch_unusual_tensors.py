"""The torch adapter meets tensors and graphs outside the usual path without internal errors: checkpointing
(saved values replaced by the hooks' placeholders), torch.func's wrapped tensors (no storage of their own), a view
made under no_grad whose base was then changed in place (PyTorch refuses to read its grad_fn), and a report that
fails half-way (its node is reported again later, not known by a key the builder never got)."""

import pytest

torch = pytest.importorskip("torch")

import gradviz  # noqa: E402
from gradviz.tracing.builder import TraceBuilder  # noqa: E402


def _traced(fn):
    with gradviz.trace(engine="torch") as tr:
        result = fn()
    return result, tr.to_dict()


def _checkpointed(use_checkpoint):
    from torch.utils.checkpoint import checkpoint

    torch.manual_seed(0)
    lin = torch.nn.Linear(64, 64)
    x = torch.randn(32, 64, requires_grad=True)

    def block(t):
        return torch.tanh(lin(torch.tanh(lin(t)))) * 2

    def run():
        y = checkpoint(block, x, use_reentrant=False) if use_checkpoint else block(x)
        loss = y.square().sum()
        loss.backward()
        return loss.item(), x.grad.clone(), lin.weight.grad.clone()

    return run


def test_checkpoint_is_traced_without_internal_errors_and_holds_less():
    untraced = _checkpointed(True)()
    (loss, xg, wg), doc = _traced(_checkpointed(True))
    assert doc["internal_errors"] == []
    assert loss == untraced[0] and torch.equal(xg, untraced[1]) and torch.equal(wg, untraced[2])
    _, plain = _traced(_checkpointed(False))
    # the checkpointed block keeps none of its activations for backward (PyTorch recomputes them)
    assert doc["memory"]["peak_retained_bytes"] < plain["memory"]["peak_retained_bytes"]


def test_torch_func_grad_is_traced_without_internal_errors():
    from torch.func import grad

    x = torch.linspace(-1, 1, 5)

    def f(t):
        return (t.sin() * 2).sum()

    expected = grad(f)(x)
    got, doc = _traced(lambda: grad(f)(x))
    assert torch.equal(got, expected)
    assert doc["internal_errors"] == []
    # the gradient norms are those of the values under torch.func's wrappers (2.4 and 2.9 cannot read a wrapper)
    ops = {n["id"]: n["op"] for n in doc["nodes"]}
    (call,) = doc["backwards"]
    norms = {ops[int(key)]: value for key, value in call["grad_norms"].items()}
    assert norms == pytest.approx({"SumBackward0": 1.0, "MulBackward0": 5 ** 0.5, "SinBackward0": 2 * 5 ** 0.5})


def test_embedding_padding_row_view_is_traced_without_internal_errors():
    def run():
        torch.manual_seed(0)
        emb = torch.nn.Embedding(5, 3, padding_idx=0)  # zeroes its padding row in place under no_grad
        out = emb(torch.tensor([[0, 2, 4]]))
        out.sum().backward()
        return emb.weight.grad.clone()

    expected = run()
    got, doc = _traced(run)
    assert doc["internal_errors"] == []
    assert torch.equal(got, expected) and float(got[0].abs().sum()) == 0.0


def test_a_node_whose_report_failed_is_reported_when_met_again(monkeypatch):
    original = TraceBuilder.op
    failed = []

    def op_failing_once(self, key, op, *args, **kwargs):
        if op == "TanhBackward0" and not failed:
            failed.append(key)
            raise RuntimeError("planted")
        return original(self, key, op, *args, **kwargs)

    monkeypatch.setattr(TraceBuilder, "op", op_failing_once)
    x = torch.ones(3, requires_grad=True)

    def run():
        y = x.tanh()
        z = y * 3  # its input node failed to report: reported now, as a node of its own
        z.sum().backward()
        return x.grad.clone()

    got, doc = _traced(run)
    assert failed
    assert [e["message"] for e in doc["internal_errors"]] == ["planted"]
    ops = [n["op"] for n in doc["nodes"]]
    assert "MulBackward0" in ops and "TanhBackward0" in ops
    assert torch.allclose(got, 3 * (1 - torch.tanh(torch.ones(3)) ** 2))
