"""What `gradviz torchrun` prints for a job, on 2 real gloo ranks: each rank's printed lines stay whole (torchrun
runs the ranks with `python -u`), the table speaks for the job at 80 columns, and the exit status follows the
documented policy (docs/distributed.md "Exit status"): an error diagnostic makes the job exit 1 where plain
torchrun exits 0, said on stderr; `--fail-on never` gives torchrun's own status."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

REPO = Path(__file__).resolve().parent.parent

# both ranks print at once after a barrier; the head is outside DDP (ddp-grad-mismatch, an error)
CHATTY = """\
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
body = DistributedDataParallel(nn.Linear(4, 8))
head = nn.Linear(8, 1)
opt = torch.optim.SGD([*body.parameters(), *head.parameters()], lr=0.1)
for step in range(2):
    opt.zero_grad()
    loss = head(body(torch.randn(8, 4) + rank)).pow(2).mean()
    loss.backward()
    opt.step()
dist.barrier()
for i in range(400):
    print("rank", rank, "line", i, "of the chatty job", "x" * 30)
dist.destroy_process_group()
"""
WHOLE = re.compile(r"rank [01] line \d+ of the chatty job x{30}")


def job(tmp_path, *options):
    (tmp_path / "chatty.py").write_text(CHATTY)
    # TMPDIR: torchelastic's log folders go with the test's files
    env = dict(os.environ, PYTHONPATH=str(REPO), COLUMNS="80", OMP_NUM_THREADS="1", TMPDIR=str(tmp_path))
    return subprocess.run([sys.executable, "-m", "gradviz", "torchrun", "--no-render", "--out", "out", *options,
                           "--standalone", "--nproc-per-node", "2", "chatty.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def default_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("chatty")
    return job(tmp), tmp


def test_each_rank_prints_whole_lines(default_run):
    result, _ = default_run
    printed = [line for line in result.stdout.splitlines() if "chatty job" in line]
    assert len(printed) == 800
    assert [line for line in printed if not WHOLE.fullmatch(line)] == []


def test_an_error_diagnostic_makes_the_job_exit_1_and_says_why(default_run):
    result, tmp = default_run
    assert result.returncode == 1
    doc = json.loads((tmp / "out" / "report.json").read_text())
    assert [d["code"] for d in doc["diagnostics"]] == ["ddp-grad-mismatch"]
    assert doc["job"]["exit_code"] == 0 and doc["job"]["verdict"] is None
    assert ("gradviz: exit status 1: a diagnostic at or above --fail-on error (torchrun itself exited 0; "
            "--fail-on never gives torchrun's own status)") in result.stderr


def test_the_table_fits_80_columns_and_counts_the_job_level_diagnostic_on_every_rank(default_run):
    result, _ = default_run
    lines = result.stdout.splitlines()
    header = next(line for line in lines if line.startswith("process"))
    assert header.split() == ["process", "status", "stopped", "at", "iters", "graphs", "structs", "peak", "mem",
                              "diags"]
    rows = [line for line in lines if re.match(r"rank \d +finished", line)]
    assert len(rows) == 2 and all(len(line) <= 80 for line in [header, *rows])
    assert [row.split()[-1] for row in rows] == ["1", "1"]  # the job's ddp-grad-mismatch names both ranks


def test_fail_on_never_gives_torchruns_own_status(tmp_path):
    result = job(tmp_path, "--fail-on", "never")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "exit status" not in result.stderr
