"""dead-relu (info): a ReLU whose units are zero for the whole batch on every full iteration, named at the
ReLU's line with the layer feeding it by ``gradviz run`` in its default mode on real PyTorch; silent on a
healthy network."""

import pytest

from tests.silent_bugs import SAMPLES, found, light_schedule, line_of, run

pytest.importorskip("torch")

NET = '''\
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
x, y = torch.randn(64, 6), torch.randint(0, 3, (64,))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(6, 32), nn.Linear(32, 3)
        {init}

    def forward(self, x):
        h = {relu}  # RELU
        return self.fc2(h)


model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(40):
    optimizer.zero_grad()
    F.cross_entropy(model(x), y).backward()
    optimizer.step()
'''


def _script(tmp_path, relu="F.relu(self.fc1(x))", init="pass"):
    script = tmp_path / "net.py"
    script.write_text(NET.format(relu=relu, init=init))
    return script


def test_the_sample_is_named_at_the_model_call_with_the_layer_feeding_the_relu(tmp_path):
    sample = SAMPLES / "dead_relu.py"
    doc = run(sample, tmp_path)
    light_schedule(doc)
    [d] = doc["diagnostics"]
    line = line_of(sample, "loss = F.cross_entropy(model(points[batch])")
    assert (d["code"], d["severity"], d["location"]["line"]) == ("dead-relu", "info", line)
    assert d["message"].startswith(f"`model.1` (ReLU) at line {line}, fed by `model.0` (Linear): all of its 64 "
                                   "units were zero for every example of the batch on each of the 8 full iterations "
                                   "seen (iterations 0 to 128).")
    assert d["hint"].startswith("Start the units alive and keep them so: `model.0` with its default initialisation")
    assert "`nn.LeakyReLU(0.01)`" in d["hint"]
    assert d["details"] == {"module": "model.1", "feeder": "model.0", "units": 64, "least_dead": 1.0,
                            "iterations": 8}


def test_the_fixed_twin_is_silent(tmp_path):
    doc = run(SAMPLES / "dead_relu_fixed.py", tmp_path)
    assert doc["diagnostics"] == []
    # it was measured: about half the units are alive
    [r] = [r for r in doc["training"]["dead_relu"] if r["iterations"] > 1]
    assert r["mostly_dead"] == 0 and r["least_dead"] < 0.5


@pytest.mark.parametrize("relu", ["F.relu(self.fc1(x))", "torch.relu(self.fc1(x))", "self.fc1(x).relu()"])
def test_a_functional_relu_killed_by_its_bias_is_named_in_the_forward(relu, tmp_path):
    script = _script(tmp_path, relu, "nn.init.constant_(self.fc1.bias, -5.0)")
    doc = run(script, tmp_path / "out")
    [d] = found(doc, "dead-relu")
    assert d["location"]["line"] == line_of(script, "# RELU")
    assert d["details"]["feeder"] == "model.fc1" and d["details"]["units"] == 32
    assert {r["role"]: r["location"]["line"] for r in d["related"]} == {"model.fc1 feeds it": line_of(script, "# RELU")}
    assert doc["diagnostics"] == [d]


@pytest.mark.parametrize("relu", ["F.relu(self.fc1(x))", "F.leaky_relu(self.fc1(x))"])
def test_a_healthy_network_is_silent(relu, tmp_path):
    assert run(_script(tmp_path, relu), tmp_path / "out")["diagnostics"] == []


def test_the_counts_are_read_once_an_iteration_not_once_a_relu_call(tmp_path, monkeypatch):
    """Three ReLU calls a step, every step full: each count stays on the device until the iteration's counts are
    read together (one host sync an iteration), and the figures are those of every call."""
    from gradviz.tracing.adapters.torch import relu_watch

    reads = []
    read = relu_watch._read_counts
    monkeypatch.setattr(relu_watch, "_read_counts", lambda counts: reads.append(len(counts)) or read(counts))
    script = _script(tmp_path, "F.relu(F.relu(self.fc1(x)) - 100.0) + F.relu(self.fc1(x))")
    doc = run(script, tmp_path / "out", "torch", "--full")
    assert reads == [3] * 40
    calls = {(r["location"]["line"], r["calls"], r["iterations"], r["mostly_dead"])
             for r in doc["training"]["dead_relu"]}
    assert calls == {(line_of(script, "# RELU"), 120, 40, 40)}  # (one line: the three calls are one entry)
