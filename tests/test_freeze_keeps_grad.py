"""freeze-ineffective's second half: parameters frozen with their ``.grad`` left set, which an optimizer step
still changes (SGD's momentum and weight decay, Adam's running averages, a stale gradient). Named at the
freeze's line with the step, by ``gradviz run`` in its default (light) mode on real PyTorch, at the first
iteration and at a late one; silent on freezes that hold and on deliberate updates of frozen weights."""

import pytest

from tests.silent_bugs import SAMPLES, light_schedule, line_of, run

pytest.importorskip("torch")

LOOP = '''\
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
x, y = torch.randn(64, 6), torch.randint(0, 3, (64,))
model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
optimizer = torch.optim.{optimizer}
{setup}
for step in range(80):
    {before}
    {clear}
    F.cross_entropy(model(x), y).backward()
    optimizer.step()  # step
    {after}
'''


def _script(tmp_path, setup="pass", before="pass", after="pass", clear="optimizer.zero_grad(set_to_none=False)",
            optimizer="SGD(model.parameters(), lr=0.1, momentum=0.9)"):
    script = tmp_path / "loop.py"
    script.write_text(LOOP.format(setup=setup, before=before, after=after, clear=clear, optimizer=optimizer))
    return script


def test_the_sample_is_named_at_the_freeze_with_the_step(tmp_path):
    sample = SAMPLES / "freeze_keeps_grad.py"
    doc = run(sample, tmp_path)
    light_schedule(doc)
    [d] = doc["diagnostics"]
    assert (d["code"], d["severity"]) == ("freeze-ineffective", "warning")
    assert d["location"]["line"] == line_of(sample, "    p.requires_grad = False")
    assert {r["role"]: r["location"]["line"] for r in d["related"]} == {
        "still changed by this step": line_of(sample, "loss_b.backward()") + 1}  # (the second loop's step)
    assert d["details"] == {"parameters": ["backbone.0.bias", "backbone.0.weight", "backbone.2.bias",
                                           "backbone.2.weight"], "count": 4, "stale": False, "optimizer": "SGD",
                            "steps": 120, "iteration": d["details"]["iteration"]}
    assert d["details"]["iteration"] > 80  # the freeze came after 80 light-mode pretraining steps
    assert "SGD updates every parameter whose `.grad` is not None" in d["message"]
    assert d["hint"].startswith("Drop their gradients when freezing: `p.grad = None`")


def test_the_fixed_twin_is_silent(tmp_path):
    assert run(SAMPLES / "freeze_keeps_grad_fixed.py", tmp_path)["diagnostics"] == []


@pytest.mark.parametrize("when", ["first", "late"])
def test_a_module_frozen_by_its_method_and_moved_by_adam_is_named(when, tmp_path):
    freeze = "model[0].requires_grad_(False)  # freeze"
    at = 0 if when == "first" else 50  # after a step: the zero_grad that follows leaves zeros, not None
    script = _script(tmp_path, after=f"if step == {at}:\n        {freeze}",
                     optimizer="Adam(model.parameters(), lr=0.01)")
    doc = run(script, tmp_path / "out")
    light_schedule(doc)
    [d] = doc["diagnostics"]
    assert (d["code"], d["location"]["line"]) == ("freeze-ineffective", line_of(script, "# freeze"))
    assert [r["location"]["line"] for r in d["related"]] == [line_of(script, "# step")]
    assert d["details"]["parameters"] == ["model.0.bias", "model.0.weight"] and d["details"]["optimizer"] == "Adam"
    assert d["details"]["stale"] is False
    # Adam's running averages of the earlier gradients move them on each step after the freeze
    assert d["details"]["steps"] >= 10


def test_a_freeze_between_backward_and_step_names_the_stale_gradient(tmp_path):
    script = tmp_path / "stale.py"
    script.write_text(LOOP.split("for step")[0].format(optimizer="SGD(model.parameters(), lr=0.1, momentum=0.9)",
                                                      setup="pass") + """\
for step in range(80):
    optimizer.zero_grad()
    F.cross_entropy(model(x), y).backward()
    if step == 40:
        for p in model[2].parameters():
            p.requires_grad = False  # freeze
    optimizer.step()  # step
""")
    doc = run(script, tmp_path / "out")
    assert [d["code"] for d in doc["diagnostics"]] == ["freeze-ineffective"], doc["diagnostics"]
    [d] = doc["diagnostics"]
    assert d["location"]["line"] == line_of(script, "# freeze")
    assert [r["location"]["line"] for r in d["related"]] == [line_of(script, "# step")]
    # the step right after the freeze applies the gradient it left; zero_grad() then drops it
    assert d["details"]["stale"] is True and d["details"]["steps"] == 1
    assert "by their stale gradients" in d["message"]


@pytest.mark.parametrize("setup,before,clear", [
    # the default zero_grad drops the frozen weights' gradients: every optimizer skips them
    ("for p in model[0].parameters():\n    p.requires_grad = False", "pass", "optimizer.zero_grad()"),
    # the gradients dropped at the freeze, zero_grad(set_to_none=False) then has nothing to zero
    ("for p in model[0].parameters():\n    p.requires_grad = False\n    p.grad = None", "pass",
     "optimizer.zero_grad(set_to_none=False)"),
    # frozen and unfrozen again before any step
    ("model[0].requires_grad_(False)\nmodel[0].requires_grad_(True)", "pass",
     "optimizer.zero_grad(set_to_none=False)"),
    # an EMA copy of the weights, frozen, updated by hand under no_grad (no optimizer holds it)
    ("import copy\nema = copy.deepcopy(model).requires_grad_(False)",
     "with torch.no_grad():\n        for e, p in zip(ema.parameters(), model.parameters()):\n"
     "            e.mul_(0.9).add_(p, alpha=0.1)", "optimizer.zero_grad(set_to_none=False)"),
    # plain SGD on zero gradients: the frozen weights do not move
    ("for p in model[0].parameters():\n    p.requires_grad = False\nmodel[0].weight.grad = "
     "torch.zeros_like(model[0].weight)\nmodel[0].bias.grad = torch.zeros_like(model[0].bias)", "pass",
     "optimizer.zero_grad(set_to_none=False)"),
])
def test_freezes_that_hold_are_silent(setup, before, clear, tmp_path):
    optimizer = "SGD(model.parameters(), lr=0.1)" if "zeros_like" in setup else \
        "SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-3)"
    script = _script(tmp_path, setup=setup, before=before, clear=clear, optimizer=optimizer)
    assert run(script, tmp_path / "out")["diagnostics"] == []


def test_one_patch_per_call_while_attached():
    """The freeze is read by the calls already watched: ``requires_grad_`` is not wrapped again on ``nn.Parameter``
    (the light watch's wrapper and the mode's handler note it), and the attribute's one patch reads through the
    tensor's own C getter (no Python frame per ``p.requires_grad`` read)."""
    import torch

    import gradviz

    base = torch._C.TensorBase.__dict__["requires_grad"]
    p = torch.nn.Parameter(torch.zeros(2))
    with gradviz.trace(engine="torch"):
        patch = torch.nn.Parameter.__dict__["requires_grad"]
        assert "requires_grad_" not in torch.nn.Parameter.__dict__
        assert isinstance(patch, property) and patch.fget == base.__get__
        assert p.requires_grad is True
        p.requires_grad = False
        assert p.requires_grad is False and base.__get__(p) is False
    assert "requires_grad" not in torch.nn.Parameter.__dict__


def test_a_freeze_is_noted_once_per_call_on_a_thread_that_keeps_its_mode(monkeypatch):
    """While the tracing thread is light, another thread keeps the mode, which hands ``requires_grad_`` back to
    the light watch's wrapper (torch looks the method up by name): one call, one note, on either thread."""
    import threading

    import torch

    import gradviz
    from gradviz.tracing.adapters.frozen_watch import FrozenWatch

    notes = []
    noted = FrozenWatch.noted
    monkeypatch.setattr(FrozenWatch, "noted", lambda self, p, value: notes.append(
        (threading.current_thread() is threading.main_thread(), value)) or noted(self, p, value))
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with gradviz.trace(engine="torch", light=True, trace_steps=(1000, 1000)):
        for _ in range(2):
            opt.zero_grad()
            model(torch.randn(4, 3)).sum().backward()
            opt.step()
        assert hasattr(torch.Tensor.requires_grad_, "__wrapped__")  # light: the watch's wrapper is installed
        model.bias.requires_grad_(False)
        worker = threading.Thread(target=lambda: model.weight.requires_grad_(False))
        worker.start()
        worker.join()
        model.weight.requires_grad_(True)
    assert notes == [(True, False), (False, False), (True, True)]
