"""The loss-input mistakes (softmax-before-cross-entropy, sigmoid-before-bce-with-logits, nll-on-probabilities):
named at the user's line by ``gradviz run`` in its default mode, on real PyTorch and on gradviz's engine, silent
on the fixed twins, and seen when the mistake first appears on a late, light iteration."""

import pytest

from tests.silent_bugs import SAMPLES, found, light_schedule, line_of, run

pytest.importorskip("torch")

LATE = '''\
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
x = torch.randn(64, 6)
y = (x[:, 0] > 0).long() + (x[:, 1] > 0).long()
model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(60):
    optimizer.zero_grad()
    scores = model(x)
    if step >= 40:
        scores = {late}  # the mistake, from step 40 on
    loss = {loss}
    loss.backward()
    optimizer.step()
'''


@pytest.mark.parametrize("engine", ["torch", "gradviz"])
def test_softmax_before_cross_entropy_is_named_at_the_softmax_line(engine, tmp_path):
    sample = SAMPLES / "softmax_before_cross_entropy.py"
    doc = run(sample, tmp_path, engine)
    if engine == "torch":
        light_schedule(doc)
    [d] = found(doc, "softmax-before-cross-entropy")
    assert [x["code"] for x in doc["diagnostics"]] == ["softmax-before-cross-entropy"]
    assert d["severity"] == "warning"
    assert d["location"]["line"] == line_of(sample, "return F.softmax(self.out(h), dim=1)")
    assert {r["role"]: r["location"]["line"] for r in d["related"]} == {
        "cross-entropy loss here": line_of(sample, "loss = criterion(model(x), y)")}
    assert "`criterion` (nn.CrossEntropyLoss)" in d["message"]
    assert "write `return self.out(h)` instead of `return F.softmax(self.out(h), dim=1)`" in d["hint"]


@pytest.mark.parametrize("engine", ["torch", "gradviz"])
def test_softmax_before_cross_entropy_fixed_twin_is_silent(engine, tmp_path):
    doc = run(SAMPLES / "softmax_before_cross_entropy_fixed.py", tmp_path, engine)
    assert doc["diagnostics"] == []


def test_an_nn_softmax_layer_is_named_by_its_path(tmp_path):
    script = tmp_path / "layer.py"
    script.write_text(LATE.replace("nn.Linear(16, 3))", "nn.Linear(16, 3), nn.Softmax(dim=1))").format(
        late="scores", loss="F.cross_entropy(scores, y)"))
    doc = run(script, tmp_path / "out")
    [d] = found(doc, "softmax-before-cross-entropy")
    assert d["location"]["line"] == line_of(script, "scores = model(x)")
    assert d["details"]["softmax_module"] == "model.3"
    assert "Remove the `nn.Softmax` layer (`model.3`)" in d["hint"]


def test_a_softmax_appearing_on_a_late_light_iteration_is_found(tmp_path):
    script = tmp_path / "late.py"
    script.write_text(LATE.format(late="scores.softmax(dim=1)", loss="F.cross_entropy(scores, y)"))
    doc = run(script, tmp_path / "out")
    full = light_schedule(doc)
    assert not any(r["first"] <= 40 <= r["last"] for r in full)  # step 40 itself was light
    [d] = found(doc, "softmax-before-cross-entropy")
    assert d["location"]["line"] == line_of(script, "scores = scores.softmax(dim=1)")
    assert d["hint"].startswith("Delete `scores = scores.softmax(dim=1)` and feed the logits to the loss")


def test_log_softmax_then_nll_and_soft_targets_are_not_flagged(tmp_path):
    script = tmp_path / "fine.py"
    script.write_text(LATE.format(
        late="scores.log_softmax(dim=1)",
        loss="F.nll_loss(scores, y) if step >= 40 else F.cross_entropy(scores, F.one_hot(y, 3).float().softmax(1))"))
    doc = run(script, tmp_path / "out")
    assert doc["diagnostics"] == []


@pytest.mark.parametrize("engine", ["torch", "gradviz"])
def test_sigmoid_before_bce_with_logits_names_the_layer(engine, tmp_path):
    sample = SAMPLES / "sigmoid_before_bce_with_logits.py"
    doc = run(sample, tmp_path, engine)
    assert [x["code"] for x in doc["diagnostics"]] == ["sigmoid-before-bce-with-logits"]
    [d] = doc["diagnostics"]
    assert d["severity"] == "warning"
    assert d["location"]["line"] == line_of(sample, "scores = model(x)")
    assert d["details"]["sigmoid_module"] == "model.4"
    assert {r["role"]: r["location"]["line"] for r in d["related"]} == {
        "BCE-with-logits loss here": line_of(sample, "loss = criterion(scores, y)")}
    assert "Remove the `nn.Sigmoid` layer (`model.4`)" in d["hint"]


@pytest.mark.parametrize("name", ["sigmoid_before_bce_with_logits_fixed.py", "nll_on_probabilities_fixed.py"])
@pytest.mark.parametrize("engine", ["torch", "gradviz"])
def test_fixed_twins_are_silent(name, engine, tmp_path):
    assert run(SAMPLES / name, tmp_path, engine)["diagnostics"] == []


def test_a_late_functional_sigmoid_gets_its_line_rewritten(tmp_path):
    script = tmp_path / "late.py"
    script.write_text(LATE.replace("nn.Linear(16, 3))", "nn.Linear(16, 1), nn.Flatten(0))").format(
        late="torch.sigmoid(scores)", loss="F.binary_cross_entropy_with_logits(scores, (y > 0).float())"))
    doc = run(script, tmp_path / "out")
    light_schedule(doc)
    [d] = doc["diagnostics"]
    assert (d["code"], d["location"]["line"]) == ("sigmoid-before-bce-with-logits",
                                                  line_of(script, "scores = torch.sigmoid(scores)"))
    assert d["hint"].startswith("Delete `scores = torch.sigmoid(scores)`")


@pytest.mark.parametrize("engine", ["torch", "gradviz"])
def test_nll_on_probabilities_rewrites_the_softmax_line(engine, tmp_path):
    sample = SAMPLES / "nll_on_probabilities.py"
    doc = run(sample, tmp_path, engine)
    assert [x["code"] for x in doc["diagnostics"]] == ["nll-on-probabilities"]
    [d] = doc["diagnostics"]
    text = "probabilities = F.softmax(model(train_x[batch]), dim=1)"
    assert d["severity"] == "warning" and d["location"]["line"] == line_of(sample, text)
    assert {r["role"]: r["location"]["line"] for r in d["related"]} == {
        "NLL loss here": line_of(sample, "loss = F.nll_loss(probabilities, train_y[batch])")}
    assert "write `probabilities = F.log_softmax(model(train_x[batch]), dim=1)` instead of" in d["hint"]


def test_a_late_softmax_into_nll_is_found_and_log_of_softmax_is_not(tmp_path):
    script = tmp_path / "late.py"
    script.write_text(LATE.format(late="F.softmax(scores, dim=1)", loss="F.nll_loss(scores, y)"))
    doc = run(script, tmp_path / "out")
    light_schedule(doc)
    [d] = doc["diagnostics"]
    assert (d["code"], d["location"]["line"]) == ("nll-on-probabilities",
                                                  line_of(script, "scores = F.softmax(scores, dim=1)"))
    fine = tmp_path / "fine.py"
    fine.write_text(LATE.format(late="torch.log(F.softmax(scores, dim=1))", loss="F.nll_loss(scores, y)"))
    assert run(fine, tmp_path / "out2")["diagnostics"] == []


@pytest.mark.parametrize("engine", ["torch", "gradviz"])
def test_a_column_minus_a_vector_in_a_loss_is_named_with_both(engine, tmp_path):
    sample = SAMPLES / "loss_broadcast.py"
    doc = run(sample, tmp_path, engine)
    assert [d["code"] for d in doc["diagnostics"]] == ["loss-broadcast"]
    [d] = doc["diagnostics"]
    assert d["severity"] == "warning"
    assert d["location"]["line"] == line_of(sample, "loss = ((pred - y) ** 2).mean()")
    assert d["details"] == {"prediction": "pred", "target": "y", "shape": [50, 50]}
    assert {r["role"]: r["location"]["line"] for r in d["related"]} == {
        "pred made here": line_of(sample, "pred = model(x)")}
    assert d["hint"].startswith("Make the shapes equal: `pred.squeeze(1)` (or `y.unsqueeze(1)`)")


@pytest.mark.parametrize("engine", ["torch", "gradviz"])
def test_loss_broadcast_twin_is_silent(engine, tmp_path):
    assert run(SAMPLES / "loss_broadcast_fixed.py", tmp_path, engine)["diagnostics"] == []


@pytest.mark.parametrize("loss", [
    "(scores[:, :1] - scores[:, 1].detach()[None, :]).pow(2).mean() + F.cross_entropy(scores, y)",  # pairwise
    "F.cross_entropy(scores, y) + 0.01 * (scores[:, :1] * scores[:, 1:2].t()).mean()",  # both from the model
])
def test_deliberate_pairwise_terms_are_not_reported(loss, tmp_path):
    script = tmp_path / "pairwise.py"
    script.write_text(LATE.format(late="scores", loss=loss))
    assert run(script, tmp_path / "out")["diagnostics"] == []


@pytest.mark.parametrize("engine", ["torch", "gradviz"])
def test_log_softmax_over_the_batch_is_named_and_rewritten(engine, tmp_path):
    sample = SAMPLES / "softmax_wrong_dim.py"
    doc = run(sample, tmp_path, engine)
    assert [d["code"] for d in doc["diagnostics"]] == ["softmax-wrong-dim"]
    [d] = doc["diagnostics"]
    assert d["severity"] == "warning"
    assert d["location"]["line"] == line_of(sample, "return F.log_softmax(self.fc2(x), dim=0)")
    assert d["details"] == {"dim": 0, "shape": [40, 5]}
    assert {r["role"]: r["location"]["line"] for r in d["related"]} == {
        "loss here": line_of(sample, "loss = F.nll_loss(model(train_x[batch]), train_y[batch])")}
    assert "write `return F.log_softmax(self.fc2(x), dim=1)`" in d["hint"]


@pytest.mark.parametrize("engine", ["torch", "gradviz"])
def test_softmax_wrong_dim_twin_is_silent(engine, tmp_path):
    assert run(SAMPLES / "softmax_wrong_dim_fixed.py", tmp_path, engine)["diagnostics"] == []


def test_a_softmax_over_a_sequence_dimension_or_a_single_row_is_not_reported(tmp_path):
    script = tmp_path / "fine.py"
    script.write_text(LATE.format(  # attention-like weights over dim 0 of a (T, 1) column, then the usual loss
        late="scores * torch.softmax(scores[:, :1], dim=0)", loss="F.cross_entropy(scores, y)"))
    assert run(script, tmp_path / "out")["diagnostics"] == []
