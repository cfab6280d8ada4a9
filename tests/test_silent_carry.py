"""hidden-state-not-detached and gan-fake-not-detached, and the fix that fits the cause in graph-freed,
stale-version and retained-graph: named at the user's line by ``gradviz run`` in its default mode, on real
PyTorch (and gradviz's engine for the samples); silent on the fixed twins and on deliberate uses."""

import json

import pytest
from click.testing import CliRunner

from gradviz.cli import main
from tests.silent_bugs import SAMPLES, found, light_schedule, line_of, run

pytest.importorskip("torch")

TBPTT = '''\
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
series = torch.sin(torch.arange(0, 1200, dtype=torch.float32) * 0.1).unsqueeze(-1)
rnn, head = nn.GRU(1, 16), nn.Linear(16, 1)
optimizer = torch.optim.SGD([*rnn.parameters(), *head.parameters()], lr=0.05)
state = torch.zeros(1, 1, 16)
for step in range(60):
    x, y = series[step * 10:step * 10 + 10].unsqueeze(1), series[step * 10 + 1:step * 10 + 11].unsqueeze(1)
    {before}
    optimizer.zero_grad()
    out, state = rnn(x, state)  # carry
    loss = F.mse_loss(head(out), y)
    loss.backward({backward})  # backward
    optimizer.step()
'''

GAN = '''\
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
gen = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 1))
disc = nn.Sequential(nn.Linear(1, 8), nn.ReLU(), nn.Linear(8, 1))
opt_g = torch.optim.Adam(gen.parameters(), lr=1e-3)
opt_d = torch.optim.Adam(disc.parameters(), lr=1e-3)
ones, zeros = torch.ones(16, 1), torch.zeros(16, 1)
for step in range(60):
    real = 3.0 + torch.randn(16, 1)
    opt_d.zero_grad()
    {clear_g}
    fake = gen(torch.randn(16, 2))
    seen = {seen}
    d_loss = (F.binary_cross_entropy_with_logits(disc(real), ones)
              + F.binary_cross_entropy_with_logits(disc(seen), zeros))  # d loss
    d_loss.backward({retain})  # d backward
    opt_d.step()  # d step
    {clear_g_late}
    g_loss = F.binary_cross_entropy_with_logits(disc(fake), ones)
    g_loss.backward()
    opt_g.step()  # g step
'''


def run_raising(script, out, engine="torch"):
    """``run`` for a script that raises (its backward): the exit status is the script's, 1."""
    args = ["run", "--engine", engine, "--no-render", "--fail-on", "never", "-q", "--out", str(out), str(script)]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 1, result.output
    assert "backward through the graph a second time" in result.output or \
        "modified by an inplace operation" in result.output, result.output
    doc = json.loads((out / "report.json").read_text())
    assert doc["internal_errors"] == []
    return doc


def _ranges(full):
    """The schedule's full ranges as (first, last) pairs."""
    return [(r["first"], r["last"]) for r in full]


def _write(tmp_path, template, **fields):
    script = tmp_path / "loop.py"
    script.write_text(template.format(**fields))
    return script


def _tbptt(tmp_path, before="pass", backward=""):
    return _write(tmp_path, TBPTT, before=before, backward=backward)


def _gan(tmp_path, seen="fake", retain="retain_graph=True", clear_g="opt_g.zero_grad()", clear_g_late="pass"):
    return _write(tmp_path, GAN, seen=seen, retain=retain, clear_g=clear_g, clear_g_late=clear_g_late)


# ----- hidden-state-not-detached ------------------------------------------------------------------------------
@pytest.mark.parametrize("engine", ["torch", "gradviz"])
def test_a_language_model_carrying_its_lstm_state_is_named_at_the_call(engine, tmp_path):
    sample = SAMPLES / "hidden_state_not_detached.py"
    doc = run_raising(sample, tmp_path, engine)
    assert [d["code"] for d in doc["diagnostics"]] == ["hidden-state-not-detached", "graph-freed"]
    carry, freed = doc["diagnostics"]
    call = line_of(sample, "logits, hidden = model(x, hidden)")
    assert carry["severity"] == "warning" and carry["location"]["line"] == call
    assert carry["details"]["module"] == "model.lstm" and carry["details"]["argument"] == "hidden"
    assert carry["details"]["made_iteration"] == 0 and carry["details"]["iteration"] == 1
    assert f"Write `hidden = tuple(h.detach() for h in hidden)` before `logits, hidden = model(x, hidden)` at " \
           f"line {call}" in carry["hint"]
    # the error names the cause and writes the same fix instead of rebuilding the graph or retain_graph
    assert freed["location"]["line"] == line_of(sample, "loss.backward()")
    assert "`hidden` is fed back into `model.lstm` (LSTM)" in freed["message"]
    assert "reused in a later iteration" not in freed["message"]
    assert freed["hint"].startswith(f"Detach the carried state before the call: write "
                                    f"`hidden = tuple(h.detach() for h in hidden)` before line {call}")
    assert {r["role"]: r["location"]["line"] for r in freed["related"]}[
        "hidden carried here without detach()"] == call


@pytest.mark.parametrize("engine", ["torch", "gradviz"])
def test_the_detached_twin_is_silent(engine, tmp_path):
    assert run(SAMPLES / "hidden_state_not_detached_fixed.py", tmp_path, engine)["diagnostics"] == []


def test_retain_graph_moves_the_error_and_the_version_error_gets_the_detach_fix(tmp_path):
    script = _tbptt(tmp_path, backward="retain_graph=True")
    doc = run_raising(script, tmp_path / "out")
    carry = found(doc, "hidden-state-not-detached")
    assert [d["location"]["line"] for d in carry] == [line_of(script, "# carry")]
    assert carry[0]["hint"].startswith("Write `state = state.detach()` before `out, state = rnn(x, state)`")
    [stale] = found(doc, "stale-version")
    assert "because `state` is fed back into `rnn` (GRU)" in stale["message"]
    assert f"write `state = state.detach()` before line {line_of(script, '# carry')}" in stale["hint"]
    assert "out-of-place" not in stale["hint"]


def test_a_state_carried_only_from_a_late_iteration_is_named_in_the_default_mode(tmp_path):
    script = _tbptt(tmp_path, before="state = state.detach() if step < 45 else state")
    doc = run_raising(script, tmp_path / "out")
    assert not any(first <= 45 <= last for first, last in _ranges(light_schedule(doc)))  # a light one
    [carry] = found(doc, "hidden-state-not-detached")
    assert carry["location"]["line"] == line_of(script, "# carry")
    assert carry["details"]["iteration"] == 45 and carry["details"]["made_iteration"] == 44
    [freed] = found(doc, "graph-freed")
    assert "state = state.detach()" in freed["hint"]


@pytest.mark.parametrize("before,backward", [
    ("state = state.detach()", ""),  # the fix
    ("state = torch.zeros(1, 1, 16)", ""),  # a new state every batch
])
def test_a_detached_or_fresh_state_is_silent(before, backward, tmp_path):
    doc = run(_tbptt(tmp_path, before=before, backward=backward), tmp_path / "out")
    assert doc["diagnostics"] == []


def test_a_cell_unrolled_within_one_iteration_and_sampling_without_grad_are_silent(tmp_path):
    script = tmp_path / "cell.py"
    script.write_text('''\
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
cell, head = nn.GRUCell(3, 8), nn.Linear(8, 1)
optimizer = torch.optim.Adam([*cell.parameters(), *head.parameters()], lr=1e-2)
for step in range(30):
    h = torch.zeros(4, 8)
    for t in range(6):  # the state passed from call to call inside one iteration
        h = cell(torch.randn(4, 3), h)
    loss = F.mse_loss(head(h), torch.ones(4, 1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
with torch.no_grad():  # sampling carries the state across calls, with no graph
    for t in range(10):
        h = cell(torch.randn(4, 3), h)
''')
    assert run(script, tmp_path / "out")["diagnostics"] == []


# ----- gan-fake-not-detached ----------------------------------------------------------------------------------
@pytest.mark.parametrize("engine", ["torch", "gradviz"])
def test_a_gan_silenced_with_retain_graph_is_named_where_fake_enters_the_discriminator(engine, tmp_path):
    sample = SAMPLES / "gan_fake_not_detached.py"
    doc = run(sample, tmp_path, engine)
    assert [d["code"] for d in doc["diagnostics"]] == ["gan-fake-not-detached"]
    [d] = doc["diagnostics"]
    assert d["severity"] == "warning"
    assert d["location"]["line"] == line_of(sample, "discriminator(fake), zeros")
    assert d["details"]["tensor"] == "fake" and d["details"]["parameters"] == 4
    assert d["details"]["iteration"] <= 2 and d["details"]["steps"] == 300  # every step of the sample
    assert d["hint"].startswith("Detach it where the other loss reads it: `discriminator(fake.detach())` at line")
    assert {r["role"]: r["location"]["line"] for r in d["related"]} == {
        "its backward wrote them here": line_of(sample, "d_loss.backward(retain_graph=True)"),
        "opt_d stepped here": line_of(sample, "opt_d.step()"),
        "opt_g applied them here": line_of(sample, "opt_g.step()")}


@pytest.mark.parametrize("engine", ["torch", "gradviz"])
def test_the_detached_gan_twin_is_silent(engine, tmp_path):
    assert run(SAMPLES / "gan_fake_not_detached_fixed.py", tmp_path, engine)["diagnostics"] == []


def test_without_retain_graph_the_error_says_detach_and_one_training_step(tmp_path):
    script = _gan(tmp_path, retain="")
    doc = run_raising(script, tmp_path / "out")
    [freed] = doc["diagnostics"]
    assert freed["code"] == "graph-freed" and freed["location"]["line"] == line_of(script, "g_loss.backward()")
    assert "Both backward calls belong to one training step" in freed["message"]
    assert "a later iteration" not in freed["message"]
    assert freed["hint"].startswith(f"Detach it where the first loss reads it: `disc(seen.detach())` at line "
                                    f"{line_of(script, '# d loss')}") or \
        freed["hint"].startswith(f"Detach it where the first loss reads it: `disc(fake.detach())` at line "
                                 f"{line_of(script, '# d loss')}")


def test_a_fake_left_attached_from_a_late_step_is_named_in_the_default_mode(tmp_path):
    script = _gan(tmp_path, seen="fake.detach() if step < 45 else fake")
    doc = run(script, tmp_path / "out")
    light_schedule(doc)
    [d] = found(doc, "gan-fake-not-detached")
    assert d["details"]["iteration"] >= 45
    assert d["location"]["line"] == line_of(script, "# d loss")


@pytest.mark.parametrize("fields", [
    {"seen": "fake.detach()", "retain": ""},  # the fix
    {"clear_g": "pass", "clear_g_late": "opt_g.zero_grad()"},  # the generator's gradients cleared after d's backward
])
def test_a_detached_fake_or_a_generator_cleared_before_its_own_backward_is_silent(fields, tmp_path):
    assert run(_gan(tmp_path, **fields), tmp_path / "out")["diagnostics"] == []


def test_two_optimizers_stepping_one_loss_are_silent(tmp_path):
    script = tmp_path / "two.py"
    script.write_text('''\
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
model = nn.Sequential(nn.Embedding(10, 8), nn.Flatten(), nn.Linear(24, 1))
sparse = torch.optim.SGD(model[0].parameters(), lr=0.1)
dense = torch.optim.Adam(model[2].parameters(), lr=1e-2)
for step in range(40):
    x = torch.randint(0, 10, (16, 3))
    sparse.zero_grad()
    dense.zero_grad()
    loss = F.mse_loss(model(x), x.float().mean(1, keepdim=True))
    loss.backward()
    sparse.step()
    dense.step()
''')
    assert run(script, tmp_path / "out")["diagnostics"] == []
