"""scheduler-misuse: named at the ``scheduler.step()`` line by ``gradviz run`` in its default mode, on real
PyTorch and on gradviz's engine; silent on the fixed twin and on schedules meant per batch."""

import pytest

from tests.silent_bugs import SAMPLES, found, light_schedule, line_of, run

pytest.importorskip("torch")

LOOP = '''\
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
x, y = torch.randn(64, 6), torch.randint(0, 3, (64,))
model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
{setup}
for step in range(80):
    {before}
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    {after}
'''


def _script(tmp_path, setup="pass", before="pass", after="pass"):
    script = tmp_path / "loop.py"
    script.write_text(LOOP.format(setup=setup, before=before, after=after))
    return script


@pytest.mark.parametrize("engine", ["torch", "gradviz"])
def test_an_epoch_schedule_stepped_per_batch_is_named_at_its_step(engine, tmp_path):
    sample = SAMPLES / "scheduler_misuse.py"
    doc = run(sample, tmp_path, engine)
    assert [d["code"] for d in doc["diagnostics"]] == ["scheduler-misuse"]
    [d] = doc["diagnostics"]
    assert d["severity"] == "warning"
    assert d["location"]["line"] == line_of(sample, "        scheduler.step()")
    assert {r["role"]: r["location"]["line"] for r in d["related"]} == {
        "scheduler built here": line_of(sample, "scheduler = torch.optim.lr_scheduler.StepLR(")}
    # 0.05 * 0.5 ** 10 < 0.05 / 1000 after 30 steps: 162 of the 192 steps at that rate
    assert d["details"] == {"kind": "collapse", "scheduler": "StepLR", "iteration": 30, "collapsed_after": 30,
                            "optimizer_steps": 192, "scheduler_steps": 192}
    assert "from 0.05 to 4.88e-05 after 30 steps" in d["message"]
    assert d["hint"].startswith("StepLR counts epochs: call `scheduler.step()` once per epoch, after the loop")


@pytest.mark.parametrize("engine", ["torch", "gradviz"])
def test_the_schedule_stepped_per_epoch_is_silent(engine, tmp_path):
    assert run(SAMPLES / "scheduler_misuse_fixed.py", tmp_path, engine)["diagnostics"] == []


@pytest.mark.parametrize("engine", ["torch", "gradviz"])
def test_a_scheduler_stepped_before_its_optimizer_is_named_with_the_step(engine, tmp_path):
    script = _script(tmp_path, "scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.99)",
                     before="scheduler.step()  # the mistake")
    doc = run(script, tmp_path / "out", engine)
    [d] = doc["diagnostics"]
    assert d["code"] == "scheduler-misuse" and d["location"]["line"] == line_of(script, "# the mistake")
    assert {r["role"]: r["location"]["line"] for r in d["related"]} == {
        "the optimizer's step it came before": line_of(script, "optimizer.step()"),
        "scheduler built here": line_of(script, "scheduler = torch.optim")}
    assert d["details"] == {"kind": "before", "scheduler": "ExponentialLR", "iteration": 1}
    assert "first learning rate (0.1) is skipped" in d["message"]
    assert d["hint"].startswith(f"Call `scheduler.step()` after `optimizer.step()` at line "
                                f"{line_of(script, 'optimizer.step()')}: for a schedule in epochs")


def test_a_scheduler_built_late_and_stepped_first_is_found(tmp_path):
    script = _script(tmp_path, before="if step == 50:\n"
                                      "        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 10)\n"
                                      "    if step >= 50:\n"
                                      "        scheduler.step()  # the mistake")
    doc = run(script, tmp_path / "out")
    light_schedule(doc)
    [d] = doc["diagnostics"]
    assert (d["code"], d["location"]["line"]) == ("scheduler-misuse", line_of(script, "# the mistake"))
    assert d["details"]["iteration"] in (50, 51)  # (a call before the iteration's first op may count with the last)


def test_a_collapse_that_starts_late_is_found(tmp_path):
    # per epoch for 40 steps (every 20), then moved into the batch loop: the rate collapses at step 63
    script = _script(tmp_path, "scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1, gamma=0.5)",
                     after="if step % 20 == 19 or step >= 40:\n        scheduler.step()  # the mistake")
    doc = run(script, tmp_path / "out")
    light_schedule(doc)
    assert found(doc, "scheduler-misuse") == []  # under half the steps collapsed: not yet judged so
    script.write_text(script.read_text().replace("range(80)", "range(160)"))
    doc = run(script, tmp_path / "out2")
    [d] = found(doc, "scheduler-misuse")
    assert d["location"]["line"] == line_of(script, "# the mistake")
    assert d["details"]["kind"] == "collapse" and d["details"]["collapsed_after"] == 48


@pytest.mark.parametrize("setup,after", [
    # schedules meant per batch: one cycle, cosine over every step, a warm-up, warm restarts
    ("scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.5, total_steps=80)", "scheduler.step()"),
    ("scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=80)", "scheduler.step()"),
    ("scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 10))",
     "scheduler.step()"),
    ("scheduler = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(optimizer, T_0=10)", "scheduler.step()"),
    # per epoch: a plateau schedule given a metric, a step schedule every 20 batches
    ("scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer)",
     "if step % 20 == 19:\n        scheduler.step(loss.item())"),
    ("scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1, gamma=0.1)",
     "if step % 20 == 19:\n        scheduler.step()"),
    # a sequence of two schedules, stepped per batch, whose inner steps are its own
    ("scheduler = torch.optim.lr_scheduler.SequentialLR(optimizer, [torch.optim.lr_scheduler.LinearLR("
     "optimizer, 0.1, total_iters=10), torch.optim.lr_scheduler.ExponentialLR(optimizer, 0.99)], [10])",
     "scheduler.step()"),
])
def test_schedules_used_as_meant_are_not_reported(setup, after, tmp_path):
    doc = run(_script(tmp_path, setup, after=after), tmp_path / "out")
    assert doc["diagnostics"] == []


ACCUMULATE = '''\
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
x, y = torch.randn(64, 6), torch.randint(0, 3, (64,))
model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(60):
    for part in range({k}):
        loss = F.cross_entropy(model(x[part::{k}]), y[part::{k}]{reduction})
        {backward}
    optimizer.step()
    optimizer.zero_grad()
'''


@pytest.mark.parametrize("engine", ["torch", "gradviz"])
def test_accumulated_mean_losses_not_divided_are_named_at_the_backward(engine, tmp_path):
    sample = SAMPLES / "accumulation_not_scaled.py"
    doc = run(sample, tmp_path, engine)
    [d] = found(doc, "accumulation-not-scaled")
    assert sorted(x["code"] for x in doc["diagnostics"]) == ["accumulation-not-scaled", "loss-diverging", "nan-inf"]
    assert d["severity"] == "info"
    assert d["location"]["line"] == line_of(sample, "        loss.backward()")
    assert {r["role"]: r["location"]["line"] for r in d["related"]} == {
        "the step that applies the sum": line_of(sample, "optimizer.step()")}
    assert d["details"]["calls_per_step"] == 8 and d["details"]["steps"] >= 2
    assert d["details"]["loss"].startswith("MseLossBackward")
    assert "write `(loss / 8).backward()`" in d["hint"]


@pytest.mark.parametrize("engine", ["torch", "gradviz"])
def test_accumulation_divided_is_silent(engine, tmp_path):
    assert run(SAMPLES / "accumulation_not_scaled_fixed.py", tmp_path, engine)["diagnostics"] == []


def test_accumulation_that_starts_late_is_found(tmp_path):
    script = tmp_path / "late.py"
    script.write_text(ACCUMULATE.format(k="1 if step < 40 else 4", reduction="",
                                        backward="loss.backward()  # the mistake")
                      .replace("range(1 if step < 40 else 4)", "range(parts)")
                      .replace("x[part::1 if step < 40 else 4]", "x[part::parts]")
                      .replace("y[part::1 if step < 40 else 4]", "y[part::parts]")
                      .replace("    for part in", "    parts = 1 if step < 40 else 4\n    for part in"))
    doc = run(script, tmp_path / "out")
    light_schedule(doc)
    [d] = doc["diagnostics"]
    assert (d["code"], d["location"]["line"]) == ("accumulation-not-scaled", line_of(script, "# the mistake"))
    assert d["details"]["calls_per_step"] == 4 and d["details"]["steps"] == 20
    assert "write `(loss / 4).backward()`" in d["hint"]


@pytest.mark.parametrize("reduction,backward", [
    ("", "(loss / 4).backward()"),  # divided
    ("", "loss.mul(0.25).backward()"),  # scaled another way
    (", reduction='sum'", "loss.backward()"),  # summed losses: the sum is what is meant
])
def test_scaled_or_summed_accumulation_is_not_reported(reduction, backward, tmp_path):
    script = tmp_path / "loop.py"
    script.write_text(ACCUMULATE.format(k=4, reduction=reduction, backward=backward))
    assert run(script, tmp_path / "out")["diagnostics"] == []


def test_two_backward_lines_per_step_are_not_accumulation(tmp_path):
    # a discriminator's real and fake losses, each backward once per step (DCGAN's way)
    script = tmp_path / "loop.py"
    script.write_text(ACCUMULATE.format(k=1, reduction="", backward="loss.backward()\n"
                                        "        F.cross_entropy(model(x), y).backward()"))
    assert run(script, tmp_path / "out")["diagnostics"] == []


FREEZE = '''\
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
x, y = torch.randn(64, 6), torch.randint(0, 3, (64,))
model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
{setup}
for step in range(60):
    {before}
    optimizer.zero_grad()
    F.cross_entropy(model(x), y).backward()
    optimizer.step()
'''


@pytest.mark.parametrize("engine", ["torch", "gradviz"])
def test_a_module_frozen_by_attribute_is_named_at_the_assignment(engine, tmp_path):
    sample = SAMPLES / "freeze_ineffective.py"
    doc = run(sample, tmp_path, engine)
    assert [d["code"] for d in doc["diagnostics"]] == ["freeze-ineffective"]
    [d] = doc["diagnostics"]
    assert d["severity"] == "warning"
    assert d["location"]["line"] == line_of(sample, "backbone.requires_grad = False")
    assert {r["role"]: r["location"]["line"] for r in d["related"]} == {
        "its parameters stepped here": line_of(sample, "optimizer.step()")}
    assert d["details"] == {"module": "backbone", "parameters": ["0.weight", "0.bias", "2.weight", "2.bias"],
                            "training": 4, "total": 4, "iteration": d["details"]["iteration"]}
    assert d["hint"].startswith("Write `backbone.requires_grad_(False)`")


@pytest.mark.parametrize("engine", ["torch", "gradviz"])
def test_a_module_frozen_by_its_method_is_silent(engine, tmp_path):
    assert run(SAMPLES / "freeze_ineffective_fixed.py", tmp_path, engine)["diagnostics"] == []


def test_a_freeze_by_attribute_late_in_the_run_is_found(tmp_path):
    script = tmp_path / "late.py"
    script.write_text(FREEZE.format(setup="pass",
                                    before="if step == 45:\n        model[0].requires_grad = False  # mistake"))
    doc = run(script, tmp_path / "out")
    light_schedule(doc)
    [d] = doc["diagnostics"]
    assert (d["code"], d["location"]["line"]) == ("freeze-ineffective", line_of(script, "# mistake"))
    assert d["details"]["module"] == "model.0" and d["details"]["training"] == 2
    assert d["hint"].startswith("Write `model[0].requires_grad_(False)`")


@pytest.mark.parametrize("setup", [
    # the attribute, then the parameters frozen too
    "model[0].requires_grad = False\nfor p in model[0].parameters():\n    p.requires_grad = False",
    # a module whose class defines requires_grad itself
    "class Gate(nn.Linear):\n    requires_grad = True\nmodel[2] = Gate(16, 3)\n"
    "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\nmodel[2].requires_grad = False",
    # the attribute on a module whose parameters no optimizer holds (nothing is stepped)
    "spare = nn.Linear(6, 6)\nspare.requires_grad = False",
    # set to True: nothing to freeze
    "model[0].requires_grad = True",
])
def test_freezes_that_hold_or_are_deliberate_are_not_reported(setup, tmp_path):
    script = tmp_path / "loop.py"
    script.write_text(FREEZE.format(setup=setup, before="pass"))
    assert run(script, tmp_path / "out")["diagnostics"] == []


DIVERGE = '''\
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
x = torch.randn(64, 6)
y = x @ torch.randn(6, 1)
model = nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Linear(32, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
{setup}
for step in range(80):
    {before}
    optimizer.zero_grad()
    loss = F.mse_loss(model(x), y){scale}
    loss.backward()  # backward
    optimizer.step()
'''


@pytest.mark.parametrize("engine", ["torch", "gradviz"])
def test_a_diverging_loss_is_named_at_the_optimizer_with_its_rate(engine, tmp_path):
    sample = SAMPLES / "loss_diverging.py"
    doc = run(sample, tmp_path, engine)
    assert sorted(d["code"] for d in doc["diagnostics"]) == ["loss-diverging", "nan-inf"]
    [d] = found(doc, "loss-diverging")
    assert d["severity"] == "warning"
    assert d["location"]["line"] == line_of(sample, "optimizer = torch.optim.SGD(")
    assert {r["role"]: r["location"]["line"] for r in d["related"]} == {
        "the loss that diverged": line_of(sample, "loss.backward()")}
    assert d["details"]["optimizer"] == "SGD" and d["details"]["lr"] == 0.5
    assert d["details"]["nonfinite_iteration"] > d["details"]["rise_iteration"]
    assert "(lr=0.5) are too large" in d["message"]
    assert d["hint"].startswith("Lower the learning rate: write `lr=0.05` in `optimizer = torch.optim.SGD(")


@pytest.mark.parametrize("engine", ["torch", "gradviz"])
def test_a_converging_loss_is_silent(engine, tmp_path):
    assert run(SAMPLES / "loss_diverging_fixed.py", tmp_path, engine)["diagnostics"] == []


def test_a_divergence_that_starts_late_is_found(tmp_path):
    # a learning rate raised by hand at step 50: the loss climbs from there
    script = tmp_path / "late.py"
    script.write_text(DIVERGE.format(setup="pass", scale="", before="if step == 50:\n"
                                     "        for group in optimizer.param_groups:\n"
                                     "            group['lr'] = 2.0"))
    doc = run(script, tmp_path / "out")
    light_schedule(doc)
    [d] = found(doc, "loss-diverging")
    assert d["location"]["line"] == line_of(script, "optimizer = torch.optim.SGD(")
    assert d["details"]["rise_iteration"] > 50
    assert [r["location"]["line"] for r in d["related"]] == [line_of(script, "# backward")]


@pytest.mark.parametrize("setup,before,scale", [
    # one batch whose loss spikes ten thousand times, then back to normal
    ("pass", "pass", " + (1e4 if step == 30 else 0.0)"),
    # a loss that is negative at its lowest (a log-likelihood)
    ("pass", "pass", " - 10.0"),
    # a loss that starts high and falls
    ("pass", "pass", " + 1000.0 / (step + 1)"),
    # a second task trained by the same line: one jump far above the first task's lowest loss, then falling
    ("pass", "pass", " * (1e-5 if step < 40 else 1.0 + 40.0 / step)"),
])
def test_losses_that_do_not_diverge_are_not_reported(setup, before, scale, tmp_path):
    script = tmp_path / "loop.py"
    script.write_text(DIVERGE.format(setup=setup, before=before, scale=scale))
    assert found(run(script, tmp_path / "out"), "loss-diverging") == []
