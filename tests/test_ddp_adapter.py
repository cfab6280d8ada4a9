"""The torch adapter's DDP watcher in this process, on a one-rank gloo group (no ranks to start): what it records,
that PyTorch's behaviour and errors pass through unchanged, and that it leaves nothing behind when the trace stops.
"""

import pytest

import gradviz
from gradviz.diagnose.ddp_rules import diagnose_job

torch = pytest.importorskip("torch")
dist = torch.distributed
nn = torch.nn
DDP = torch.nn.parallel.DistributedDataParallel

from .ddp_one_rank import Net, one_rank  # noqa: E402,F401 (one_rank: the module's process group)


def test_nothing_is_left_behind_when_the_trace_stops():
    own_forward = DDP.forward
    model = DDP(Net())
    with gradviz.trace(engine="torch") as tr:
        assert DDP.forward is not own_forward
        model(torch.randn(2, 3)).sum().backward()
    assert DDP.forward is own_forward
    inner = model.module
    assert all(not p._post_accumulate_grad_hooks for p in inner.parameters())
    assert all(not m._forward_pre_hooks for m in inner.modules())
    assert tr.to_dict()["ddp"]["forwards"][0]["backward"] is True


def test_no_ddp_no_section():
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with gradviz.trace(engine="torch") as tr:
        model(torch.randn(2, 3)).sum().backward()
        opt.step()
    assert "ddp" not in tr.to_dict()


def test_no_sync_evaluation_and_steps_are_recorded():
    torch.manual_seed(0)
    model = DDP(Net())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with gradviz.trace(engine="torch") as tr:
        with model.no_sync():
            model(torch.randn(2, 3)).sum().backward()
        model(torch.randn(2, 3)).sum().backward()
        grads = {n: (p.grad.norm().item(), p.grad.sum().item()) for n, p in model.named_parameters()}
        opt.step()
        with torch.no_grad():
            model(torch.randn(2, 3))
    doc = tr.to_dict()
    assert doc["internal_errors"] == []
    ddp = doc["ddp"]
    assert ddp["process"] == {"rank": 0, "world_size": 1, "backend": "gloo"}
    assert [(f["synced"], f["backward"]) for f in ddp["forwards"]] == [(False, True), (True, True), (False, False)]
    [step] = ddp["steps"]
    assert step["micro"][0]["backwards"] == 2 and step["micro"][0]["synced"] == 1
    assert step["location"]["text"] == "opt.step()"
    for name, (norm, total) in grads.items():
        got = step["gradients"][f"model.{name}"]
        assert got[0] == pytest.approx(norm, rel=1e-6) and got[1] == total
    assert diagnose_job([tr.to_dict()]) == []


def _steps(light, total):
    model = DDP(Net())
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with gradviz.trace(engine="torch", light=light) as tr:
        for _ in range(total):
            opt.zero_grad()
            model(torch.randn(2, 3)).sum().backward()
            opt.step()
    return tr.to_dict()


def test_gradients_are_fingerprinted_on_the_full_iterations_only_and_those_steps_are_kept():
    doc = _steps(light=True, total=70)
    ddp = doc["ddp"]
    assert ddp["step_count"] == 70
    full = [it for r in doc["schedule"]["full"] for it in range(r["first"], r["last"] + 1)]
    assert full == [0, 1, 2, 8, 16, 32, 64]
    sampled = [s["step"] for s in ddp["steps"] if s["gradients"]]
    assert sampled == full  # step 32 is kept although it is neither among the first nor the last 32 steps
    assert [s["step"] for s in ddp["steps"]] == [*range(32), 32, *range(38, 70)]
    assert all(len(s["gradients"]) == 6 for s in ddp["steps"] if s["gradients"])


def test_every_step_is_fingerprinted_when_every_iteration_is_traced_in_full():
    ddp = _steps(light=False, total=5)["ddp"]
    assert [bool(s["gradients"]) for s in ddp["steps"]] == [True] * 5


def test_accumulation_without_no_sync_on_one_rank():
    model = DDP(Net())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with gradviz.trace(engine="torch") as tr:
        for _ in range(3):
            loss = model(torch.randn(2, 3)).sum()
            loss.backward()
        opt.step()
    [d] = diagnose_job([tr.to_dict()])
    assert d["code"] == "ddp-accumulate-without-no-sync"
    assert d["location"]["text"] == "loss = model(torch.randn(2, 3)).sum()"
    assert (d["details"]["micro_steps"], d["details"]["synchronised"], d["details"]["ranks"]) == (3, 3, [0])


def _skip_then_forward(model):
    model(torch.randn(2, 3), deep=False).sum().backward()
    model(torch.randn(2, 3)).sum().backward()


def test_pytorchs_reduction_error_passes_through_unchanged_and_is_recorded():
    torch.manual_seed(0)
    with pytest.raises(RuntimeError) as plain:
        _skip_then_forward(DDP(Net()))
    torch.manual_seed(0)
    model = DDP(Net())
    with pytest.raises(RuntimeError) as traced:
        with gradviz.trace(engine="torch") as tr:
            _skip_then_forward(model)
    assert str(traced.value) == str(plain.value)
    assert "Expected to have finished reduction in the prior iteration" in str(traced.value)
    doc = tr.to_dict()
    [error] = doc["ddp"]["errors"]
    assert (error["forward"], error["rank"]) == (1, 0)
    assert sorted(error["parameters"]) == ["model.module.b.bias", "model.module.b.weight"]
    assert doc["ddp"]["forwards"][0]["unused"] == ["model.module.b.weight", "model.module.b.bias"]
    assert doc["ddp"]["forwards"][0]["skipped"] == ["model.module.b"]
    [d] = diagnose_job([doc])
    assert d["code"] == "ddp-unused-parameters" and d["details"]["reduction_error_rank"] == 0
    # the layer was never called on the only rank before the error: placed at the DDP call
    assert d["location"]["text"] == "model(torch.randn(2, 3), deep=False).sum().backward()"
