"""param-not-in-optimizer: named at the line that made the parameter by ``gradviz run`` in its default mode, on
real PyTorch and on gradviz's engine; silent on the fixed twin and on parameters left out on purpose (a backbone
frozen by omission, a parameter updated by hand, two optimizers sharing a model)."""

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
{setup}
for step in range(60):
    {before}
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()  # backward
    {after}
    optimizer.step()
'''


def _script(tmp_path, setup, before="pass", after="pass"):
    script = tmp_path / "loop.py"
    script.write_text(LOOP.format(setup=setup, before=before, after=after))
    return script


@pytest.mark.parametrize("engine", ["torch", "gradviz"])
def test_layers_in_a_python_list_are_named_at_the_list(engine, tmp_path):
    sample = SAMPLES / "param_not_in_optimizer.py"
    doc = run(sample, tmp_path, engine)
    assert [d["code"] for d in doc["diagnostics"]] == ["param-not-in-optimizer"]
    [d] = doc["diagnostics"]
    assert d["severity"] == "warning" and d["details"]["cause"] == "unregistered"
    assert d["location"]["line"] == line_of(sample, "self.blocks = [nn.Linear(width, width)")
    assert len(d["variables"]) == 6  # three blocks' weights and biases
    assert {r["role"]: r["location"]["line"] for r in d["related"]} == {
        "optimizer built here": line_of(sample, "optimizer = torch.optim.Adam("),
        "gradients computed here": line_of(sample, "loss.backward()")}
    assert "write `self.blocks = nn.ModuleList([nn.Linear(width, width) for _ in range(depth)])`" in d["hint"]


@pytest.mark.parametrize("engine", ["torch", "gradviz"])
def test_module_list_twin_is_silent(engine, tmp_path):
    assert run(SAMPLES / "param_not_in_optimizer_fixed.py", tmp_path, engine)["diagnostics"] == []


@pytest.mark.parametrize("engine", ["torch", "gradviz"])
def test_a_head_replaced_after_the_optimizer_is_named_at_the_assignment(engine, tmp_path):
    script = _script(tmp_path, "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                               "model[2] = nn.Linear(16, 3)  # new head")
    doc = run(script, tmp_path / "out", engine)
    [d] = found(doc, "param-not-in-optimizer")
    assert d["details"] == {"cause": "after", "parameters": ["model.2.weight", "model.2.bias"]}
    assert d["location"]["line"] == line_of(script, "# new head")
    assert {r["role"]: r["location"]["line"] for r in d["related"]}["optimizer built here"] == \
        line_of(script, "optimizer = torch.optim.SGD(")
    assert "move `optimizer = torch.optim.SGD(model.parameters(), lr=0.1)` below line" in d["hint"]


def test_a_head_replaced_late_in_the_run_is_found(tmp_path):
    script = _script(tmp_path, "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)",
                     before="if step == 40:\n        model[2] = nn.Linear(16, 3)  # new head")
    doc = run(script, tmp_path / "out")
    light_schedule(doc)
    [d] = found(doc, "param-not-in-optimizer")
    assert d["location"]["line"] == line_of(script, "# new head")


@pytest.mark.parametrize("setup,after", [
    # a backbone frozen by omission: registered, made before the optimizer, left out on purpose
    ("optimizer = torch.optim.SGD(model[2].parameters(), lr=0.1)", "pass"),
    # one parameter updated by hand after backward
    ("scale = nn.Parameter(torch.ones(1))\nmodel.register_forward_hook(lambda m, i, o: o * scale)\n"
     "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)",
     "with torch.no_grad():\n        scale -= 0.01 * scale.grad\n        scale.grad = None"),
    # two optimizers over the parts of one model
    ("optimizer = torch.optim.SGD(model[0].parameters(), lr=0.1)\n"
     "second = torch.optim.Adam(model[2].parameters(), lr=1e-3)", "second.step()\n    second.zero_grad()"),
])
def test_parameters_left_out_on_purpose_are_not_reported(setup, after, tmp_path):
    doc = run(_script(tmp_path, setup, after=after), tmp_path / "out")
    assert found(doc, "param-not-in-optimizer") == [], doc["diagnostics"]
    assert doc["diagnostics"] == []


@pytest.mark.parametrize("engine", ["torch", "gradviz"])
def test_zero_grad_between_backward_and_step_is_named(engine, tmp_path):
    sample = SAMPLES / "zero_grad_before_step.py"
    doc = run(sample, tmp_path, engine)
    assert [d["code"] for d in doc["diagnostics"]] == ["zero-grad-before-step"]
    [d] = doc["diagnostics"]
    assert d["severity"] == "warning"
    assert d["location"]["line"] == line_of(sample, "        optimizer.zero_grad()")
    assert {r["role"]: r["location"]["line"] for r in d["related"]} == {
        "step given cleared gradients here": line_of(sample, "optimizer.step()")}
    assert d["details"] == {"optimizer": "Adam", "iteration": 1, "steps": 64}
    assert d["hint"].startswith("Move `optimizer.zero_grad()` before the forward and `backward()`")


@pytest.mark.parametrize("engine", ["torch", "gradviz"])
def test_zero_grad_twin_is_silent(engine, tmp_path):
    assert run(SAMPLES / "zero_grad_before_step_fixed.py", tmp_path, engine)["diagnostics"] == []


def test_a_zero_grad_moved_late_in_the_run_is_found(tmp_path):
    script = tmp_path / "late.py"
    script.write_text(LOOP.replace("    optimizer.zero_grad()\n", "    if step < 40:\n        optimizer.zero_grad()\n")
                      .format(setup="optimizer = torch.optim.SGD(model.parameters(), lr=0.1)", before="pass",
                              after="if step >= 40:\n        model.zero_grad()  # the mistake"))
    doc = run(script, tmp_path / "out")
    light_schedule(doc)
    [d] = doc["diagnostics"]
    assert (d["code"], d["location"]["line"]) == ("zero-grad-before-step", line_of(script, "# the mistake"))
    assert d["details"]["steps"] == 20


@pytest.mark.parametrize("setup,before,after", [
    # another optimizer's zero_grad between this one's backward and step (a GAN's generator cleared before the
    # discriminator's step)
    ("optimizer = torch.optim.SGD(model[0].parameters(), lr=0.1)\n"
     "other = torch.optim.SGD(model[2].parameters(), lr=0.1)", "pass", "other.zero_grad()"),
    # gradient accumulation: zero_grad after the step, two backward calls per step
    ("optimizer = torch.optim.SGD(model.parameters(), lr=0.1)", "pass",
     "F.cross_entropy(model(x), y).backward()"),
])
def test_zero_grad_of_another_optimizer_or_after_the_step_is_not_reported(setup, before, after, tmp_path):
    doc = run(_script(tmp_path, setup, before, after), tmp_path / "out")
    assert found(doc, "zero-grad-before-step") == []


@pytest.mark.parametrize("engine", ["torch", "gradviz"])
def test_clipping_after_the_step_is_named_with_the_step(engine, tmp_path):
    sample = SAMPLES / "clip_order.py"
    doc = run(sample, tmp_path, engine)
    assert [d["code"] for d in doc["diagnostics"]] == ["clip-order"]
    [d] = doc["diagnostics"]
    assert d["severity"] == "warning"
    assert d["location"]["line"] == line_of(sample, "torch.nn.utils.clip_grad_norm_(")
    assert {r["role"]: r["location"]["line"] for r in d["related"]} == {
        "the step it came after": line_of(sample, "optimizer.step()")}
    assert d["details"] == {"function": "clip_grad_norm_", "iteration": 1, "calls": 120, "after_step": True}
    assert "after `loss.backward()` and before `optimizer.step()`" in d["hint"]


@pytest.mark.parametrize("engine", ["torch", "gradviz"])
def test_clip_order_twin_is_silent(engine, tmp_path):
    assert run(SAMPLES / "clip_order_fixed.py", tmp_path, engine)["diagnostics"] == []


def test_clipping_before_backward_from_a_late_step_is_found(tmp_path):
    script = tmp_path / "late.py"
    script.write_text("from torch.nn.utils import clip_grad_value_\n" + LOOP.format(
        setup="optimizer = torch.optim.SGD(model.parameters(), lr=0.1)",
        before="if step >= 40:\n        clip_grad_value_(model.parameters(), 0.5)  # the mistake",
        after="if step < 40:\n        clip_grad_value_(model.parameters(), 0.5)"))
    doc = run(script, tmp_path / "out")
    light_schedule(doc)
    [d] = doc["diagnostics"]
    assert (d["code"], d["location"]["line"]) == ("clip-order", line_of(script, "# the mistake"))
    assert d["details"]["calls"] == 20 and d["details"]["function"] == "clip_grad_value_"


def test_clipping_after_accumulated_backwards_is_not_reported(tmp_path):
    script = _script(tmp_path, "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)",
                     after="F.cross_entropy(model(x), y).backward()\n"
                           "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)")
    assert run(script, tmp_path / "out")["diagnostics"] == []


@pytest.mark.parametrize("engine", ["torch", "gradviz"])
def test_a_loss_made_to_require_grad_is_named_at_its_backward(engine, tmp_path):
    sample = SAMPLES / "loss_made_leaf.py"
    doc = run(sample, tmp_path, engine)
    assert sorted(d["code"] for d in doc["diagnostics"]) == ["loss-made-leaf", "unused-parameter"]
    [d] = found(doc, "loss-made-leaf")
    assert d["severity"] == "warning"
    assert d["location"]["line"] == line_of(sample, "loss.backward()")
    assert d["details"]["loss"] == "loss"
    assert "delete the line that sets `loss.requires_grad`" in d["hint"]


@pytest.mark.parametrize("engine", ["torch", "gradviz"])
def test_loss_made_leaf_twin_is_silent(engine, tmp_path):
    assert run(SAMPLES / "loss_made_leaf_fixed.py", tmp_path, engine)["diagnostics"] == []


def test_a_loss_made_a_leaf_late_in_the_run_is_found(tmp_path):
    script = tmp_path / "late.py"
    script.write_text(LOOP.replace("    loss = F.cross_entropy(model(x), y)\n",
                                   "    loss = F.cross_entropy(model(x), y)\n"
                                   "    if step >= 40:\n"
                                   "        loss = torch.tensor(loss.item(), requires_grad=True)\n").format(
        setup="optimizer = torch.optim.SGD(model.parameters(), lr=0.1)", before="pass", after="pass"))
    doc = run(script, tmp_path / "out")
    light_schedule(doc)
    [d] = found(doc, "loss-made-leaf")
    assert d["location"]["line"] == line_of(script, "# backward")


@pytest.mark.parametrize("engine", ["torch", "gradviz"])
def test_an_optimizer_built_in_the_loop_is_named_at_its_line(engine, tmp_path):
    sample = SAMPLES / "optimizer_recreated.py"
    doc = run(sample, tmp_path, engine)
    assert [d["code"] for d in doc["diagnostics"]] == ["optimizer-recreated"]
    [d] = doc["diagnostics"]
    assert d["severity"] == "warning"
    assert d["location"]["line"] == line_of(sample, "optimizer = torch.optim.Adam(")
    assert d["details"]["optimizer"] == "Adam" and d["details"]["constructions"] == 80
    assert d["hint"].startswith("Build the optimizer once, before the training loop")


@pytest.mark.parametrize("engine", ["torch", "gradviz"])
def test_optimizer_recreated_twin_is_silent(engine, tmp_path):
    assert run(SAMPLES / "optimizer_recreated_fixed.py", tmp_path, engine)["diagnostics"] == []


@pytest.mark.parametrize("setup,before", [
    # plain SGD keeps no state: rebuilding it costs nothing
    ("pass", "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)"),
    # a fresh model (and optimizer) per task
    ("pass", "model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))\n"
             "    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)"),
])
def test_stateless_or_per_task_optimizers_are_not_reported(setup, before, tmp_path):
    assert run(_script(tmp_path, setup, before), tmp_path / "out")["diagnostics"] == []
