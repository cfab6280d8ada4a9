"""A DDP run of one process (a one-rank gloo group): the DDP rules that need no second rank run on its own document
(``ddp_rules.diagnose_process``), and PyTorch's "Expected to have finished reduction" error is explained at the
line the branch skipped, in this process and under plain ``gradviz run``.
"""

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import gradviz
from gradviz.diagnose import diagnose

torch = pytest.importorskip("torch")
dist = torch.distributed
nn = torch.nn
DDP = torch.nn.parallel.DistributedDataParallel

from . import ddp_one_rank  # noqa: E402
from .ddp_one_rank import Net, one_rank  # noqa: E402,F401 (one_rank: the module's process group)
from .marked_lines import marked_line  # noqa: E402

NET_FILE = ddp_one_rank.__file__
REPO = Path(__file__).resolve().parent.parent
REDUCTION = "Expected to have finished reduction in the prior iteration"


def _line(text):
    lines = Path(__file__).read_text().splitlines()
    [number] = [i + 1 for i, line in enumerate(lines) if line.strip().startswith(text)]
    return number


def _codes(doc):
    return sorted(d["code"] for d in doc["diagnostics"])


def _skipping_run():
    torch.manual_seed(0)
    model = DDP(Net())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(RuntimeError, match=REDUCTION):
        with gradviz.trace(engine="torch") as tr:
            for deep in (True, False, True):
                opt.zero_grad()
                model(torch.randn(2, 3), deep=deep).sum().backward()
                opt.step()
    return tr.to_dict()


def test_the_reduction_error_of_a_one_rank_run_names_the_parameters_and_the_skipped_line():
    doc = _skipping_run()
    assert REDUCTION in doc["status"]["exception"]["message"]
    [d] = [d for d in doc["diagnostics"] if d["code"] == "ddp-unused-parameters"]  # one finding, not two
    assert d["severity"] == "error"
    assert d["details"]["parameters"] == ["model.module.b.bias", "model.module.b.weight"]
    assert d["details"]["ranks"] == [0] and d["details"]["reduction_error_rank"] == 0
    # where the layer is called when it is not skipped
    assert (d["location"]["file"], d["location"]["line"]) == (NET_FILE, marked_line(NET_FILE, "# the call the branch"))
    assert "the call of `model.module.b`" in d["message"] and "was skipped" in d["message"]
    assert "find_unused_parameters=True" in d["hint"]
    roles = {r["role"]: r["location"]["line"] for r in d["related"]}
    assert roles["reduction error raised"] == _line("model(torch.randn(2, 3), deep=deep).sum().backward()")


def test_a_layer_no_forward_uses_is_reported_without_a_second_rank():
    torch.manual_seed(0)
    model = DDP(Net(), find_unused_parameters=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with gradviz.trace(engine="torch") as tr:
        for _ in range(3):
            opt.zero_grad()
            model(torch.randn(2, 3), deep=False).sum().backward()
            opt.step()
    doc = tr.to_dict()
    assert doc["ddp"]["process"]["world_size"] == 1
    [d] = [d for d in doc["diagnostics"] if d["code"] == "ddp-unused-parameters"]
    assert d["severity"] == "warning" and d["details"]["never_used"] is True
    assert d["details"]["parameters"] == ["model.module.b.bias", "model.module.b.weight"]
    assert "requires_grad_(False)" in d["hint"]


def test_accumulation_without_no_sync_is_reported_on_one_rank_and_no_sync_silences_it():
    def train(no_sync):
        torch.manual_seed(0)
        model = DDP(Net())
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        with gradviz.trace(engine="torch") as tr:
            for _ in range(2):
                opt.zero_grad()
                if no_sync:
                    with model.no_sync():
                        model(torch.randn(2, 3)).sum().backward()
                else:
                    model(torch.randn(2, 3)).sum().backward()  # the first micro-step all-reduces too
                model(torch.randn(2, 3)).sum().backward()
                opt.step()
        return tr.to_dict()

    doc = train(no_sync=False)
    [d] = [d for d in doc["diagnostics"] if d["code"] == "ddp-accumulate-without-no-sync"]
    assert d["location"]["line"] == _line("model(torch.randn(2, 3)).sum().backward()  # the first micro-step")
    assert (d["details"]["micro_steps"], d["details"]["synchronised"], d["details"]["ranks"]) == (2, 2, [0])
    assert _codes(train(no_sync=True)) == []


def test_a_rank_of_a_larger_job_is_left_to_the_job_rules():
    doc = _skipping_run()
    rank = copy.deepcopy(doc)
    rank["ddp"]["process"]["world_size"] = 2
    # the job's merge compares the ranks (diagnose_job); alone, the rank's document says nothing of DDP, and its
    # exception is not explained a second time either (the DDP watcher recorded it for the job rules)
    assert "ddp-unused-parameters" in _codes(doc)
    assert "ddp-unused-parameters" not in _codes(dict(rank, diagnostics=diagnose(rank)))


def test_the_reduction_error_without_the_watchers_record_is_still_explained():
    doc = _skipping_run()
    del doc["ddp"]  # e.g. raised where the watcher was not attached: only the script's exception is known
    [d] = [d for d in diagnose(doc) if d["code"] == "ddp-unused-parameters"]
    assert d["message"].startswith("the script stopped: DistributedDataParallel found parameters that got no "
                                   "gradient in the previous iteration (" + REDUCTION)
    assert "find_unused_parameters=True" in d["hint"] and "TORCH_DISTRIBUTED_DEBUG=INFO" in d["hint"]
    assert d["location"]["line"] == doc["status"]["exception"]["location"]["line"]


ONE_RANK_SCRIPT = """\
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(4, 8)
        self.hidden = nn.Linear(8, 8)
        self.out = nn.Linear(8, 1)

    def forward(self, x, step):
        h = torch.relu(self.inp(x))
        if step % 2 == 0:
            h = torch.relu(self.hidden(h))
        return self.out(h)


dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
model = DistributedDataParallel(Net())
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(4):
    opt.zero_grad()
    loss = model(torch.randn(8, 4), step).pow(2).mean()
    loss.backward()
    opt.step()
"""


def test_gradviz_run_of_a_one_rank_ddp_script_that_dies_of_the_reduction_error(tmp_path):
    script = tmp_path / "one_rank.py"
    script.write_text(ONE_RANK_SCRIPT)
    env = dict(os.environ, PYTHONPATH=str(REPO), COLUMNS="200", OMP_NUM_THREADS="1", TMPDIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-m", "gradviz", "run", "--no-render", "--out", "out", str(script)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 1, done.stderr
    assert REDUCTION in done.stderr  # the script's own error, as python would show it
    assert str(REPO / "gradviz") not in done.stderr  # the user's traceback, without gradviz's frames
    doc = json.loads((tmp_path / "out" / "report.json").read_text())
    [d] = [d for d in doc["diagnostics"] if d["code"] == "ddp-unused-parameters"]
    lines = ONE_RANK_SCRIPT.splitlines()
    assert d["location"]["line"] == lines.index("            h = torch.relu(self.hidden(h))") + 1
    assert d["details"]["parameters"] == ["model.module.hidden.bias", "model.module.hidden.weight"]
    assert "ddp-unused-parameters" in done.stdout and "model.module.hidden.weight" in done.stdout
    assert "find_unused_parameters=True" in done.stdout
