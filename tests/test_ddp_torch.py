"""DDP diagnostics on real ranks: torch 2.13, gloo on CPU, each rank traced by ``gradviz.trace(engine="torch")``.

One subprocess (tests/ddp_ranks.py, ``torch.multiprocessing.spawn``) runs every sample's ``train`` on 2 ranks,
one after the other in the same process group (the crashing one last); another runs one case on 4 ranks. Each
planted mistake must come out as its code, at its line, with the right ranks and parameter names.
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gradviz.diagnose.ddp_rules import diagnose_job
from gradviz.document import validate

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"
EXPECTED = json.loads((SAMPLES / "expected.json").read_text())
TWO_RANKS = ["ddp_clean.py", "ddp_divergent_graph.py", "ddp_accumulate_without_no_sync.py", "ddp_grad_mismatch.py",
             "ddp_unused_parameters.py"]  # the last one breaks the process group


# find_unused_parameters=True: a layer each rank skips every other step, one no rank calls, an evaluation pass
BRANCHES = """\
import torch
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 8)
        self.b = nn.Linear(8, 8)
        self.never = nn.Linear(8, 8)
        self.c = nn.Linear(8, 1)

    def forward(self, x, deep):
        h = torch.relu(self.a(x))
        if deep:
            h = torch.relu(self.b(h))
        return self.c(h)


def train(rank, world_size, steps=3):
    torch.manual_seed(0)
    model = DistributedDataParallel(Net(), find_unused_parameters=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(steps):
        x = torch.randn(16, 4) + rank
        opt.zero_grad()
        loss = model(x, deep=(rank + step) % 2 == 0).pow(2).mean()
        loss.backward()
        opt.step()
    with torch.no_grad():
        model(x, deep=True)
"""


def _loop(model, after_backward, imports="import torch.distributed as dist\n"):
    """A scenario's script: ``train`` fits ``model`` (an expression) for ``steps`` SGD steps on 2-layer data, and
    runs ``after_backward`` (lines, indented into the loop) between each backward and its step."""
    return f"""\
import torch
{imports}import torch.nn as nn


def train(rank, world_size, steps=3):
    torch.manual_seed(0)
    model = {model}
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        x = torch.randn(16, 4) + rank
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
{textwrap.indent(textwrap.dedent(after_backward), " " * 8)}        opt.step()
"""


SEQUENTIAL = "nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))"
# rank 0 halves one layer's gradient after DDP's all-reduce: a rank-local write the mismatch must name
LOCAL_WRITE = _loop(f"DistributedDataParallel({SEQUENTIAL})", """\
    if rank == 0:
        model.module[0].weight.grad.mul_(0.5)
""", imports="from torch.nn.parallel import DistributedDataParallel\n")
# data parallel by hand, no DDP: the loop reduces the first layer's gradients only (EVERY: all of them)
BY_HAND = _loop(SEQUENTIAL, """\
    for p in model[0].parameters():
        dist.all_reduce(p.grad)
        p.grad /= world_size
""")
# the same loop through a name imported before the trace started (ddp_ranks.py runs the module first)
BY_HAND_IMPORTED = BY_HAND.replace("import torch.distributed as dist\n", "from torch.distributed import all_reduce\n") \
    .replace("dist.all_reduce(p.grad)", "all_reduce(p.grad)")
# bucketed: the first layer's gradients flattened into one buffer, reduced at once and copied back (the last
# layer's forgotten); COALESCED: every gradient in one all_reduce_coalesced (silent)
BY_HAND_FLAT = _loop(SEQUENTIAL, """\
    grads = [p.grad for p in model[0].parameters()]
    flat = _flatten_dense_tensors(grads)
    dist.all_reduce(flat)
    for grad, synced in zip(grads, _unflatten_dense_tensors(flat, grads)):
        grad.copy_(synced / world_size)
""", imports="import torch.distributed as dist\n"
                                "from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors\n")
BY_HAND_COALESCED = _loop(SEQUENTIAL, """\
    grads = [p.grad for p in model.parameters()]
    dist.all_reduce_coalesced(grads)
    torch._foreach_div_(grads, world_size)
""")
INLINE = {"ddp_branches.py": BRANCHES, "ddp_local_write.py": LOCAL_WRITE, "ddp_by_hand.py": BY_HAND,
          "ddp_by_hand_every.py": BY_HAND.replace("model[0].parameters()", "model.parameters()"),
          "ddp_by_hand_imported.py": BY_HAND_IMPORTED, "ddp_by_hand_flat.py": BY_HAND_FLAT,
          "ddp_by_hand_coalesced.py": BY_HAND_COALESCED}


def _run_ranks(out, nprocs, names):
    # TMPDIR: mp.spawn's error files go with the test's files
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", TMPDIR=str(out))
    scripts = []
    for n in names:
        if n in INLINE:
            (out / n).write_text(INLINE[n])
            scripts.append(str(out / n))
        else:
            scripts.append(str(SAMPLES / n))
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "ddp_ranks.py"), str(out), str(nprocs), *scripts],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return _load(out, nprocs, names)


def _load(out, nprocs, names):
    return {name[:-3]: [json.loads((out / name[:-3] / f"rank{r}.json").read_text()) for r in range(nprocs)]
            for name in names}


def _shared_run(tmp_path_factory, name, nprocs, names):
    """The ranks' documents, made once per test session: under pytest-xdist every worker running tests of this
    module would otherwise start its own ranks (the usual xdist recipe: a folder all workers share, a lock)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return _run_ranks(tmp_path_factory.mktemp(name), nprocs, names)
    from filelock import FileLock  # installed with torch

    shared = tmp_path_factory.getbasetemp().parent  # this session's, common to its workers
    out = shared / name
    with FileLock(str(shared / f"{name}.lock")):
        if (out / "done").exists():
            return _load(out, nprocs, names)
        out.mkdir(exist_ok=True)
        docs = _run_ranks(out, nprocs, names)
        (out / "done").write_text("")
        return docs


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    return _shared_run(tmp_path_factory, "ddp2", 2, ["ddp_branches.py", "ddp_local_write.py", "ddp_by_hand.py",
                                                     "ddp_by_hand_every.py", "ddp_by_hand_imported.py",
                                                     "ddp_by_hand_flat.py", "ddp_by_hand_coalesced.py", *TWO_RANKS])


@pytest.fixture(scope="module")
def four(tmp_path_factory):
    return _shared_run(tmp_path_factory, "ddp4", 4, ["ddp_by_hand.py", "ddp_local_write.py", "ddp_divergent_graph.py"])


def line_of(sample, text):
    lines = (SAMPLES / sample).read_text().splitlines()
    found = [i + 1 for i, line in enumerate(lines) if text in line]
    assert len(found) == 1, (text, found)
    return found[0]


def only(diagnostics, code):
    found = [d for d in diagnostics if d["code"] == code]
    assert len(found) == 1, [(d["code"], d["message"]) for d in diagnostics]
    return found[0]


@pytest.mark.parametrize("name", TWO_RANKS)
def test_job_codes_are_the_samples_expected_ones(two, name):
    docs = two[name[:-3]]
    for doc in docs:
        validate(doc)  # the ddp section fits the schema
        assert doc["internal_errors"] == []
    assert EXPECTED[name]["ranks"] == 2
    assert sorted(d["code"] for d in diagnose_job(docs)) == sorted(EXPECTED[name]["codes"])


def test_clean_training_records_no_sync_micro_steps_and_equal_gradients(two):
    docs = two["ddp_clean"]
    assert diagnose_job(docs) == []
    for rank, doc in enumerate(docs):
        ddp = doc["ddp"]
        assert ddp["process"] == {"rank": rank, "world_size": 2, "backend": "gloo"}
        assert [m["path"] for m in ddp["modules"]] == ["model"]
        assert ddp["modules"][0]["parameters"] == ["model.module.0.weight", "model.module.0.bias",
                                                   "model.module.2.weight", "model.module.2.bias"]
        assert [f["synced"] for f in ddp["forwards"]] == [False, True] * 3  # the first micro-step under no_sync
        assert all(f["backward"] and f["unused"] == [] for f in ddp["forwards"])
        assert [(m["backwards"], m["synced"]) for s in ddp["steps"] for m in s["micro"]] == [(2, 1)] * 3
        assert ddp["accumulation"]["extra_syncs"] == 0
    grads = [[s["gradients"] for s in doc["ddp"]["steps"]] for doc in docs]
    assert grads[0] == grads[1]  # all-reduced: the same bits on both ranks
    assert all(v[0] > 0 for v in grads[0][0].values())


def test_layer_skipped_on_rank_1_is_named_at_the_skipped_call(two):
    docs = two["ddp_unused_parameters"]
    d = only(diagnose_job(docs), "ddp-unused-parameters")
    divergent = only(diagnose_job(docs), "ddp-divergent-graph")  # the same branch parts the graphs: linked
    assert d["links"] == [divergent["id"]] and divergent["location"] == d["location"]
    assert d["severity"] == "error"
    assert d["location"]["line"] == line_of("ddp_unused_parameters.py", "h = torch.relu(self.hidden(h))")
    assert d["details"]["ranks"] == [1]
    assert d["details"]["parameters"] == ["model.module.hidden.bias", "model.module.hidden.weight"]
    assert d["details"]["find_unused_parameters"] is False and d["details"]["never_used"] is False
    assert d["details"]["reduction_error_rank"] == 1
    assert "find_unused_parameters=True" in d["hint"]
    roles = {r["role"]: r["location"]["line"] for r in d["related"]}
    assert roles["reduction error raised"] == line_of("ddp_unused_parameters.py", "loss = model(x, deep=rank != 1)")
    # PyTorch's own error, caught on rank 1 at its second forward, named the same parameters
    error = docs[1]["ddp"]["errors"][0]
    assert error["message"].startswith("Expected to have finished reduction in the prior iteration")
    assert error["forward"] == 1 and error["rank"] == 1
    assert sorted(error["parameters"]) == d["details"]["parameters"]
    assert docs[1]["status"]["exception"]["type"] == "RuntimeError"  # the rank's document survived its crash
    assert docs[0]["ddp"]["unused"] == []


def test_find_unused_parameters_branch_is_info_and_a_layer_never_called_a_warning(two):
    docs = two["ddp_branches"]
    for doc in docs:
        assert [(f["synced"], f["backward"]) for f in doc["ddp"]["forwards"]] == [(True, True)] * 3 + [(False, False)]
    found = {d["details"]["parameters"][0]: d for d in diagnose_job(docs) if d["code"] == "ddp-unused-parameters"}
    assert sorted(found) == ["model.module.b.bias", "model.module.never.bias"]
    branch, never = found["model.module.b.bias"], found["model.module.never.bias"]
    assert branch["severity"] == "info" and branch["details"]["ranks"] == [0, 1]
    assert branch["location"]["text"] == "h = torch.relu(self.b(h))"
    assert branch["details"]["per_rank"] == {"0": ["model.module.b.bias", "model.module.b.weight"],
                                             "1": ["model.module.b.bias", "model.module.b.weight"]}
    assert never["severity"] == "warning" and never["details"]["never_used"] is True
    assert never["details"]["parameters"] == ["model.module.never.bias", "model.module.never.weight"]
    assert never["location"]["text"] == "loss = model(x, deep=(rank + step) % 2 == 0).pow(2).mean()"
    assert "no rank ever called `model.module.never`" in never["message"]
    assert "Remove the layer" in never["hint"]


def test_rank_dependent_branch_is_a_divergent_graph_at_its_line(two):
    d = only(diagnose_job(two["ddp_divergent_graph"]), "ddp-divergent-graph")
    assert d["location"]["line"] == line_of("ddp_divergent_graph.py", "out = out * torch.sigmoid(out)")
    assert d["details"]["groups"] == [[0], [1]]
    assert d["details"]["iteration"] == 0
    assert d["details"]["iterations_differing"] == [0, 1, 2]


def test_divergent_graph_on_four_ranks_groups_the_ranks(four):
    docs = four["ddp_divergent_graph"]
    assert [doc["ddp"]["process"]["rank"] for doc in docs] == [0, 1, 2, 3]
    d = only(diagnose_job(docs), "ddp-divergent-graph")
    assert d["details"]["groups"] == [[0, 2, 3], [1]]
    assert d["details"]["ranks"] == [0, 1, 2, 3]
    assert d["location"]["line"] == line_of("ddp_divergent_graph.py", "out = out * torch.sigmoid(out)")
    # the documents given in another order: ranks come from the documents, not the list
    assert diagnose_job(list(reversed(docs)))[0]["details"]["groups"] == [[0, 2, 3], [1]]


def test_accumulation_without_no_sync_counts_the_all_reduces(two):
    d = only(diagnose_job(two["ddp_accumulate_without_no_sync"]), "ddp-accumulate-without-no-sync")
    sample = "ddp_accumulate_without_no_sync.py"
    assert d["location"]["line"] == line_of(sample, "loss = model(x).pow(2).mean() / MICRO_STEPS")
    assert d["related"][0]["location"]["line"] == line_of(sample, "opt.step()")
    assert d["details"]["ranks"] == [0, 1]
    assert (d["details"]["micro_steps"], d["details"]["synchronised"]) == (4, 4)
    assert d["details"]["extra_all_reduces"] == 6  # 3 per step, 2 steps
    assert "model.no_sync()" in d["hint"]


def test_module_outside_ddp_has_mismatched_gradients(two):
    docs = two["ddp_grad_mismatch"]
    d = only(diagnose_job(docs), "ddp-grad-mismatch")
    assert d["location"]["line"] == line_of("ddp_grad_mismatch.py", "loss = head(backbone(x)).pow(2).mean()")
    assert d["details"]["parameters"] == ["head.bias", "head.weight"]
    assert d["details"]["not_wrapped"] == ["head.bias", "head.weight"]
    assert d["details"]["ranks"] == [0, 1] and d["details"]["step"] == 0 and d["details"]["groups"] == [[0], [1]]
    norms = d["details"]["norms"]["head.weight"]
    assert norms["0"] != norms["1"]
    # the wrapped backbone's gradients agree
    steps = [doc["ddp"]["steps"][0]["gradients"] for doc in docs]
    assert steps[0]["backbone.module.0.weight"] == steps[1]["backbone.module.0.weight"]


def _inline_line(name, text):
    lines = INLINE[name].splitlines()
    [number] = [i + 1 for i, line in enumerate(lines) if line.strip() == text]
    return number


@pytest.mark.parametrize("ranks", ["two", "four"])
def test_a_rank_local_write_into_grad_after_the_all_reduce_is_named_at_its_line(ranks, request):
    d = only(diagnose_job(request.getfixturevalue(ranks)["ddp_local_write"]), "ddp-grad-mismatch")
    line = _inline_line("ddp_local_write.py", "model.module[0].weight.grad.mul_(0.5)")
    assert d["location"]["line"] == line and d["location"]["file"].endswith("ddp_local_write.py")
    assert d["details"]["parameters"] == ["model.module.0.weight"] and d["details"]["not_wrapped"] == []
    assert f"only rank 0 wrote `model.module.0.weight`'s gradient after the all-reduce, at line {line} " \
           "(`model.module[0].weight.grad.mul_(0.5)`)" in d["message"]
    assert "Scale the loss instead" in d["hint"]


@pytest.mark.parametrize("ranks", ["two", "four"])
def test_a_hand_written_all_reduce_that_misses_parameters_is_named_at_the_loop(ranks, request):
    docs = request.getfixturevalue(ranks)["ddp_by_hand"]
    assert all(not doc["ddp"]["modules"] for doc in docs)  # no DDP anywhere
    [d] = diagnose_job(docs)
    assert d["code"] == "ddp-grad-mismatch" and d["details"]["by_hand"] is True
    assert d["location"]["line"] == _inline_line("ddp_by_hand.py", "dist.all_reduce(p.grad)")
    assert d["details"]["not_reduced"] == ["model.2.bias", "model.2.weight"]
    assert d["details"]["reduced"] == ["model.0.bias", "model.0.weight"]
    assert d["details"]["ranks"] == list(range(len(docs))) and d["details"]["step"] == 0
    assert "never `" in d["message"] and "differ across ranks" in d["message"]
    assert [r["location"]["text"] for r in d["related"]] == ["opt.step()"]


@pytest.mark.parametrize("name, line", [("ddp_by_hand_imported", "all_reduce(p.grad)"),
                                        ("ddp_by_hand_flat", "dist.all_reduce(flat)")])
def test_an_all_reduce_imported_before_the_trace_or_of_a_flat_bucket_is_seen_and_mapped_to_parameters(
        two, name, line):
    docs = two[name]
    for doc in docs:
        assert doc["internal_errors"] == []
    [d] = diagnose_job(docs)
    assert d["code"] == "ddp-grad-mismatch" and d["details"]["by_hand"] is True
    assert d["location"]["line"] == _inline_line(f"{name}.py", line)
    assert d["details"]["reduced"] == ["model.0.bias", "model.0.weight"]
    assert d["details"]["not_reduced"] == ["model.2.bias", "model.2.weight"]


def test_an_all_reduce_coalesced_of_every_gradient_stays_silent(two):
    docs = two["ddp_by_hand_coalesced"]
    assert [s["by_hand"]["not_reduced"] for s in docs[0]["ddp"]["steps"]] == [[], [], []]
    assert [len(s["by_hand"]["reduced"]) for s in docs[0]["ddp"]["steps"]] == [4, 4, 4]
    assert diagnose_job(docs) == []


def test_a_hand_written_all_reduce_of_every_gradient_stays_silent(two):
    docs = two["ddp_by_hand_every"]
    assert [s["by_hand"]["not_reduced"] for s in docs[0]["ddp"]["steps"]] == [[], [], []]
    assert diagnose_job(docs) == []
