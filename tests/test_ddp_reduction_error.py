"""PyTorch's "Expected to have finished reduction in the prior iteration" on 2 gloo ranks, through the CLI: rank 1
of samples/ddp_unused_parameters.py skips a layer and dies of that error at its next forward; the job's report
explains it once, names the parameters, the rank and the line the branch skipped, and gives the fix. Run as a
``gradviz torchrun`` job (ranks light by default, as ``gradviz run``) and as ``gradviz run --full`` (the script's
own ``mp.spawn`` children, every iteration in full): the ranks record what the run asked for.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gradviz.document import validate

pytest.importorskip("torch")

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "samples" / "ddp_unused_parameters.py"
REDUCTION = "Expected to have finished reduction in the prior iteration"


def _line(text):
    lines = SAMPLE.read_text().splitlines()
    [number] = [i + 1 for i, line in enumerate(lines) if line.strip() == text]
    return number


LAUNCHES = {
    "torchrun": (["torchrun", "--no-render", "--out", "out", "--standalone", "--nproc-per-node", "2"], "light"),
    "run --full": (["run", "--full", "--no-render", "--out", "out"], "full"),
}


@pytest.mark.parametrize("launch", sorted(LAUNCHES))
def test_the_reduction_error_of_a_rank_is_explained_once_at_the_skipped_line(launch, tmp_path):
    args, mode = LAUNCHES[launch]
    # TMPDIR: torchelastic's log folders and mp.spawn's error files go with the test's files
    env = dict(os.environ, PYTHONPATH=str(REPO), COLUMNS="200", OMP_NUM_THREADS="1", TMPDIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-m", "gradviz", *args, str(SAMPLE)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode != 0, done.stdout
    doc = json.loads((tmp_path / "out" / "report.json").read_text())
    validate(doc)
    ranks = {r["process"]["rank"]: r for r in doc["ranks"] if r["process"].get("rank") is not None}
    assert sorted(ranks) == [0, 1]
    assert REDUCTION in ranks[1]["status"]["exception"]["message"]
    assert {r["schedule"]["mode"] for r in ranks.values()} == {mode}

    [d] = [d for d in doc["diagnostics"] if d["code"] == "ddp-unused-parameters"]  # once: not also per rank
    assert d["severity"] == "error"
    assert d["location"]["line"] == _line("h = torch.relu(self.hidden(h))")
    assert d["details"]["ranks"] == [1] and d["details"]["reduction_error_rank"] == 1
    assert d["details"]["parameters"] == ["model.module.hidden.bias", "model.module.hidden.weight"]
    assert "find_unused_parameters=True" in d["hint"]
    roles = {r["role"]: r["location"]["line"] for r in d["related"]}
    assert roles["reduction error raised"] == _line("loss = model(x, deep=rank != 1).pow(2).mean()")
    # the terminal report says the same
    assert "ddp-unused-parameters" in done.stdout
    assert "`model.module.hidden.weight`" in done.stdout and "find_unused_parameters=True" in done.stdout
    if launch == "torchrun":  # gradviz prints each rank's traceback, without its own frames (under mp.spawn,
        # torch formats the child's traceback itself, the DDP watcher's forward wrapper included)
        assert REDUCTION in done.stderr and str(REPO / "gradviz") not in done.stderr
