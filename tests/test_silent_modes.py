"""train-mode-not-restored and eval-mode-forgotten: named at the user's line by ``gradviz run`` in its default
mode, on real PyTorch and on gradviz's engine, silent on the fixed twins and on deliberate uses (MC dropout,
test-time batch-norm adaptation, a teacher network, frozen batch norm), and seen when the mistake first happens
on a late, light iteration."""

import pytest

from tests.silent_bugs import SAMPLES, found, light_schedule, line_of, run

pytest.importorskip("torch")

LOOP = '''\
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
x = torch.randn(64, 6)
y = (x[:, 0] > 0).long() + (x[:, 1] > 0).long()
vx = torch.randn(32, 6)
model = nn.Sequential(nn.Linear(6, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
{setup}
for step in range(60):
    {before}
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x), y)  # training forward
    loss.backward()
    optimizer.step()
    if step == 39:
        {check}
'''


def _script(tmp_path, setup="pass", before="pass", check="pass"):
    script = tmp_path / "loop.py"
    script.write_text(LOOP.format(setup=setup, before=before, check=check))
    return script


@pytest.mark.parametrize("engine", ["torch", "gradviz"])
def test_train_mode_not_restored_names_the_training_line_and_the_eval_call(engine, tmp_path):
    sample = SAMPLES / "train_mode_not_restored.py"
    doc = run(sample, tmp_path, engine)
    if engine == "torch":
        light_schedule(doc)
    assert [d["code"] for d in doc["diagnostics"]] == ["train-mode-not-restored"]
    [d] = doc["diagnostics"]
    assert d["severity"] == "warning"
    assert d["location"]["line"] == line_of(sample, "loss = F.cross_entropy(model(train_x[batch])")
    roles = {r["role"]: r["location"]["line"] for r in d["related"]}
    assert roles["model.eval() here"] == line_of(sample, "    model.eval()")
    assert roles["trained in training mode here"] == d["location"]["line"]
    assert d["details"]["modules"] == ["model.1", "model.3", "model.5", "model.7"]
    assert d["details"]["iteration"] == 10 and d["details"]["eval_iteration"] == 10
    assert d["hint"].startswith("Call `model.train()` before the training steps, at the start of every epoch")


@pytest.mark.parametrize("engine", ["torch", "gradviz"])
def test_eval_mode_forgotten_names_the_validation_line(engine, tmp_path):
    sample = SAMPLES / "eval_mode_forgotten.py"
    doc = run(sample, tmp_path, engine)
    assert [d["code"] for d in doc["diagnostics"]] == ["eval-mode-forgotten"]
    [d] = doc["diagnostics"]
    assert d["severity"] == "warning"
    assert d["location"]["line"] == line_of(sample, "val_accuracy = (model(val_x)")
    assert {r["role"]: r["location"]["line"] for r in d["related"]} == {
        "trained in training mode here": line_of(sample, "loss = F.cross_entropy(model(train_x[batch])")}
    assert "`model.3` (Dropout)" in d["message"] and d["details"]["root"] == "model"
    assert d["hint"].startswith("Call `model.eval()` before this evaluation and `model.train()` after it")


@pytest.mark.parametrize("name", ["train_mode_not_restored_fixed.py", "eval_mode_forgotten_fixed.py"])
@pytest.mark.parametrize("engine", ["torch", "gradviz"])
def test_mode_twins_are_silent(name, engine, tmp_path):
    assert run(SAMPLES / name, tmp_path, engine)["diagnostics"] == []


def test_a_late_eval_never_undone_is_found_on_light_iterations(tmp_path):
    script = _script(tmp_path, check="model.eval()\n        with torch.no_grad():\n            model(vx)")
    doc = run(script, tmp_path / "out")
    full = light_schedule(doc)
    assert not any(r["first"] <= 40 <= r["last"] for r in full)  # the first step in eval mode was light
    [d] = found(doc, "train-mode-not-restored")
    assert d["location"]["line"] == line_of(script, "# training forward")
    assert d["details"]["iteration"] == 40
    assert {r["role"]: r["location"]["line"] for r in d["related"]}["model.eval() here"] == \
        line_of(script, "        model.eval()")
    assert [x["code"] for x in doc["diagnostics"]] == ["train-mode-not-restored"]


def test_a_late_validation_in_training_mode_is_found_on_a_light_iteration(tmp_path):
    script = _script(tmp_path, check="with torch.no_grad():\n            model(vx)  # validation")
    doc = run(script, tmp_path / "out")
    light_schedule(doc)
    [d] = doc["diagnostics"]
    assert (d["code"], d["location"]["line"]) == ("eval-mode-forgotten", line_of(script, "# validation"))
    assert d["details"]["iteration"] == 40  # (after step 39's optimizer.step(): the next iteration)


@pytest.mark.parametrize("engine", ["torch", "gradviz"])
@pytest.mark.parametrize("setup,before,check", [
    # eval and train around each validation
    ("pass", "pass", "model.eval()\n        with torch.no_grad():\n            model(vx)\n        model.train()"),
    # Monte-Carlo dropout: eval, then the dropout layers back in training mode on purpose
    ("pass", "model.train()", "model.eval()\n        model[3].train()\n        with torch.no_grad():\n"
                              "            model(vx)"),
    # test-time batch-norm adaptation: an explicit train() before a no-grad pass
    ("pass", "pass", "model.train()\n        with torch.no_grad():\n            model(vx)"),
    # a teacher network that no backward trains, run in training mode under no_grad
    ("teacher = nn.Sequential(nn.Linear(6, 16), nn.BatchNorm1d(16), nn.Dropout(0.2), nn.Linear(16, 3))",
     "pass", "with torch.no_grad():\n            teacher(vx)"),
    # batch norm frozen on purpose: its layers set to eval, the rest trains
    ("model.train()\nmodel[1].eval()", "pass", "pass"),
    # trained in eval mode from the start (a choice, not a forgotten train())
    ("model.eval()", "pass", "pass"),
])
def test_deliberate_modes_are_not_reported(setup, before, check, engine, tmp_path):
    script = _script(tmp_path, setup, before, check)
    assert run(script, tmp_path / "out", engine)["diagnostics"] == []


FUNCTIONAL = '''\
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden, self.out = nn.Linear(6, 16), nn.Linear(16, 3)

    def forward(self, x):
        return self.out({dropout})


x, y, vx = torch.randn(64, 6), torch.randint(0, 3, (64,)), torch.randn(32, 6)
model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(60):
    model.train()
    optimizer.zero_grad()
    F.cross_entropy(model(x), y).backward()
    optimizer.step()
    if step == 39:
        model.eval()
        with torch.no_grad():
            model(vx)  # evaluation
'''


@pytest.mark.parametrize("engine", ["torch", "gradviz"])
def test_dropout_in_eval_rewrites_the_functional_call(engine, tmp_path):
    sample = SAMPLES / "dropout_in_eval.py"
    doc = run(sample, tmp_path, engine)
    assert [d["code"] for d in doc["diagnostics"]] == ["dropout-in-eval"]
    [d] = doc["diagnostics"]
    assert d["severity"] == "warning"
    assert d["location"]["line"] == line_of(sample, "h = F.dropout(torch.tanh(self.hidden(x)), 0.4)")
    assert {r["role"]: r["location"]["line"] for r in d["related"]} == {
        "model.eval() here": line_of(sample, "    model.eval()"),
        "evaluated here": line_of(sample, "error = F.mse_loss(model(test_x), test_y)")}
    assert d["hint"].startswith(
        "Pass the module's mode: write `h = F.dropout(torch.tanh(self.hidden(x)), 0.4, training=self.training)`")
    assert d["details"]["count"] == 10  # one evaluation per epoch


@pytest.mark.parametrize("engine", ["torch", "gradviz"])
def test_dropout_in_eval_twin_is_silent(engine, tmp_path):
    assert run(SAMPLES / "dropout_in_eval_fixed.py", tmp_path, engine)["diagnostics"] == []


def test_a_late_first_evaluation_with_functional_dropout_is_found(tmp_path):
    script = tmp_path / "net.py"
    script.write_text(FUNCTIONAL.format(dropout="F.dropout(torch.relu(self.hidden(x)), p=0.3)"))
    doc = run(script, tmp_path / "out")
    light_schedule(doc)
    [d] = doc["diagnostics"]
    assert (d["code"], d["location"]["line"]) == ("dropout-in-eval", line_of(script, "F.dropout(torch.relu"))
    assert d["details"]["iteration"] == 40
    assert {r["role"]: r["location"]["line"] for r in d["related"]}["evaluated here"] == \
        line_of(script, "# evaluation")


@pytest.mark.parametrize("dropout", [
    "F.dropout(torch.relu(self.hidden(x)), p=0.3, training=True)",  # Monte-Carlo dropout, on purpose
    "F.dropout(torch.relu(self.hidden(x)), 0.3, self.training)",
    "F.dropout(torch.relu(self.hidden(x)), p=0.3, training=self.training)",
])
def test_functional_dropout_given_its_mode_is_not_reported(dropout, tmp_path):
    script = tmp_path / "net.py"
    script.write_text(FUNCTIONAL.format(dropout=dropout))
    assert run(script, tmp_path / "out")["diagnostics"] == []
