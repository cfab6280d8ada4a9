"""torch.distributed.rpc traced in both processes (samples/distributed/rpc_parameter_server.py, run once as a real
``gradviz run`` on gloo/TensorPipe over localhost): the trainer's ``dist_autograd.backward`` is recorded as a
backward of its local graph with its SendRpcBackward/RecvRpcBackward nodes, the forward the parameter server runs
for each remote call is recorded in the server's document at the sample's lines, and ``unseen`` lists exactly the
part of the distributed backward the server ran for the trainer."""

import json
import os
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest

from gradviz.document import validate

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "samples" / "distributed" / "rpc_parameter_server.py"
STEPS = 3


def line_of(text):
    return next(i for i, line in enumerate(SAMPLE.read_text().splitlines(), 1) if text in line)


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rpc")
    # TMPDIR: mp.spawn's error files go with the test's files
    env = dict(os.environ, PYTHONPATH=str(REPO), COLUMNS="200", OMP_NUM_THREADS="1", TMPDIR=str(tmp))
    result = subprocess.run([sys.executable, "-m", "gradviz", "run", "--engine", "torch", "--no-render", "--out",
                             "out", str(SAMPLE), str(STEPS)], cwd=tmp, env=env, capture_output=True, text=True,
                            timeout=240)
    assert result.returncode == 0, result.stderr
    doc = json.loads((tmp / "out" / "report.json").read_text())
    validate(doc)
    for rank_doc in doc["ranks"]:
        validate(rank_doc)
    return result, doc, {r["process"]["rank"]: r for r in doc["ranks"]}


def nodes_of(doc, iteration):
    return [n for n in doc["nodes"] if n["iteration"] == iteration]


def test_the_trainers_distributed_backward_is_recorded_with_its_send_and_recv_nodes(job):
    _, _, ranks = job
    trainer = ranks[0]
    assert [b["location"]["text"] for b in trainer["backwards"]] == ["dist_autograd.backward(context_id, [loss])"] * 3
    assert all(b["kind"] == "backward" and b["error"] is None for b in trainer["backwards"])
    nodes = {n["id"]: n for n in trainer["nodes"]}
    first = nodes_of(trainer, 0)
    assert Counter(n["op"] for n in first) == {"AccumulateGrad": 4, "TBackward0": 2, "AddmmBackward0": 2,
                                               "SendRpcBackward": 1, "RecvRpcBackward": 1, "MseLossBackward0": 1}
    [send] = [n for n in first if n["op"] == "SendRpcBackward"]
    [recv] = [n for n in first if n["op"] == "RecvRpcBackward"]
    call_line = line_of('hidden = rpc.rpc_sync("server", encode')
    # both made by the call that sent stem(x) and got the server's answer back: at its line, neither external
    assert (send["location"]["line"], recv["location"]["line"]) == (call_line, call_line)
    assert not send["external"] and not recv["external"] and recv["inputs"] == []
    assert [nodes[i]["op"] for i, _ in send["inputs"]] == ["AddmmBackward0"]  # the stem's output was sent
    assert nodes[send["inputs"][0][0]]["module"] == ["stem"]
    head = next(n for n in first if n["op"] == "AddmmBackward0" and n["module"] == ["head"])
    assert recv["id"] in [i for i, _ in head["inputs"]]  # the answer feeds the head
    # the backward ran through the whole local graph, the Recv node first of its side, the Send node last
    backward = trainer["backwards"][0]
    op_nodes = [n["id"] for n in first if n["op"] != "AccumulateGrad"]
    visited = backward["visited"]
    assert set(op_nodes) <= set(visited)
    assert visited[0] == next(n["id"] for n in first if n["op"] == "MseLossBackward0")
    assert visited.index(recv["id"]) < visited.index(send["id"])
    # the Send node's gradient arrives from the server inside the node: not measured, rather than a zero
    assert str(send["id"]) not in backward["grad_norms"] and backward["grad_norms"][str(recv["id"])] > 0
    # the leaves' gradients (held by the context, not .grad) are recorded for all four local parameters
    params = {v["id"]: v["name"] for v in trainer["variables"] if v["is_parameter"]}
    assert sorted(params[int(k)] for k in backward["leaf_grad_norms"]) == \
        ["head.bias", "head.weight", "stem.bias", "stem.weight"]
    assert all(norm > 0 for norm in backward["leaf_grad_norms"].values())
    assert trainer["diagnostics"] == [] and trainer["internal_errors"] == []
    # what is left unseen, exactly: the parameter updates DistributedOptimizer makes (on both workers, each step)
    [step] = trainer["unseen"]
    assert (step["kind"], step["how"], step["count"], step["location"]["line"]) == \
        ("thread", "torch.distributed.rpc", 2 * STEPS, line_of("opt.step(context_id)"))
    assert step["what"].startswith("parameter updates DistributedOptimizer.step makes on each worker")


def test_the_forward_the_server_runs_for_each_remote_call_is_in_its_document(job):
    _, _, ranks = job
    server = ranks[1]
    assert server["backwards"] == [] and server["internal_errors"] == []
    assert len(server["graphs"]) == STEPS
    first = nodes_of(server, server["nodes"][0]["iteration"])
    assert Counter(n["op"] for n in first) == {"RecvRpcBackward": 1, "TBackward0": 1, "AddmmBackward0": 1,
                                               "AccumulateGrad": 2, "TanhBackward0": 1}
    forward_line = line_of("return torch.tanh(self.fc(x))")
    lines = {n["op"]: n["location"]["line"] for n in first if n["location"]}
    assert lines == {"RecvRpcBackward": line_of("def encode(encoder_rref, x):"), "TBackward0": forward_line,
                     "AddmmBackward0": forward_line, "TanhBackward0": forward_line}
    addmm = next(n for n in first if n["op"] == "AddmmBackward0")
    assert addmm["module"] == ["Encoder", "Encoder.fc"]
    recv = next(n for n in first if n["op"] == "RecvRpcBackward")
    assert recv["id"] in [i for i, _ in addmm["inputs"]]  # the trainer's stem output arrived through it
    names = {v["name"] for v in server["variables"] if v["is_parameter"]}
    assert names == {"Encoder.fc.weight", "Encoder.fc.bias"}
    # what is left unseen, exactly: its part of the trainer's distributed backward, once per context
    assert [(e["kind"], e["how"], e["count"]) for e in server["unseen"]] == [("thread", "torch.distributed.rpc",
                                                                              STEPS)]
    assert server["unseen"][0]["what"].startswith("this process's part of distributed backwards another process "
                                                  "started")
    assert server["diagnostics"] == []


def test_the_merged_report_shows_both_roles_and_no_alarm(job):
    result, doc, _ = job
    assert doc["diagnostics"] == []
    assert doc["job"]["rpc"] == [0, 1] and doc["job"]["first_divergence"] is None
    # the launcher's own process: no graph of its own, and it says where they are; then what each process missed
    entry, step, served = doc["unseen"]
    assert (step["how"], step["count"], step["ranks"]) == ("torch.distributed.rpc (rank 0)", 2 * STEPS, [0])
    assert entry["kind"] == "no-autograd" and "its traced child processes did (rank 0, rank 1)" in entry["how"]
    assert (served["kind"], served["how"], served["count"], served["ranks"]) == \
        ("thread", "torch.distributed.rpc (rank 1)", STEPS, [1])
    assert "nothing suspicious was found" not in result.stdout and "so nothing was checked" not in result.stdout
    assert "gradviz: no mistakes seen in what it saw (" in result.stdout
    assert "Ranks 0, 1 use torch.distributed.rpc: each plays its own part" in result.stdout
    assert "first differ" not in result.stdout


def scaled(x):
    return x * 3


def test_a_process_calling_itself_over_rpc_is_traced_on_both_sides(monkeypatch):
    import socket

    import torch
    import torch.distributed.autograd as dist_autograd
    import torch.distributed.rpc as rpc

    import gradviz

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(port))
    before = {t.name for t in threading.enumerate()}  # other tests' threads in this worker (tqdm's monitor…)
    with gradviz.trace(engine="torch") as tr:
        rpc.init_rpc("solo", rank=0, world_size=1)
        try:
            w = torch.ones(2, requires_grad=True)
            with dist_autograd.context() as context_id:
                y = rpc.rpc_sync("solo", scaled, args=(w * 2,))
                z = rpc.rpc_async("solo", scaled, args=(w,)).wait()
                dist_autograd.backward(context_id, [y.sum() + z.sum()])
                grads = dist_autograd.get_gradients(context_id)
        finally:
            rpc.shutdown()
    assert grads[w].tolist() == [9.0, 9.0] and w.grad is None  # as without gradviz
    doc = tr.to_dict()
    here = Path(__file__).read_text().splitlines()
    line = {text: next(i for i, t in enumerate(here, 1) if text in t)
            for text in ("y = rpc.rpc_sync(", "return x * 3", "def scaled(x):", "[y.sum()")}
    placed = Counter((n["op"], n["location"]["line"]) for n in doc["nodes"] if n["location"])
    sync, served, backward_line = line["y = rpc.rpc_sync("], line["def scaled(x):"], line["[y.sum()"]
    # the rpc_async answer's Recv node: tagged when the answer arrives, at the call's line, unless the op that
    # uses it got there first (RPC wakes the waiter before its callbacks): then at that op's line
    [async_recv] = [n for n in doc["nodes"] if n["op"] == "RecvRpcBackward" and n["location"]
                    and n["location"]["line"] in (sync + 1, backward_line)]
    assert not async_recv["external"]
    placed[("RecvRpcBackward", async_recv["location"]["line"])] -= 1
    assert +placed == Counter({("MulBackward0", sync): 1,  # w * 2, in the rpc_sync call
                               ("SendRpcBackward", sync): 1, ("SendRpcBackward", sync + 1): 1,
                               ("RecvRpcBackward", served): 2,  # the arguments, as served
                               ("MulBackward0", line["return x * 3"]): 2,  # the served forwards
                               ("RecvRpcBackward", sync): 1,  # the rpc_sync answer
                               ("SumBackward0", backward_line): 2, ("AddBackward0", backward_line): 1})
    [backward] = doc["backwards"]
    ops = {n["id"]: n["op"] for n in doc["nodes"]}
    assert [ops[i] for i in backward["visited"]][:1] == ["AddBackward0"]
    assert {"SendRpcBackward", "RecvRpcBackward", "MulBackward0", "AccumulateGrad"} <= \
        {ops[i] for i in backward["visited"]}
    # w * 2 * 3 and w * 3 summed: 9 per element, from the context (w.grad stays None)
    assert list(backward["leaf_grad_norms"].values()) == [pytest.approx(162 ** 0.5)]
    # nothing unseen but the threads other tests left running before this trace began
    running = [t["name"] for t in (doc.get("threads") or {}).get("unobserved") or ()]
    assert [e for e in doc["unseen"] if not (e["kind"] == "thread" and all(n in before for n in running))] == []
    assert doc["internal_errors"] == []


STARTED_BEFORE = """\
import json, os, socket, sys
import torch, gradviz
import torch.distributed.rpc as rpc
from tests.test_rpc_trace import scaled

with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
rpc.init_rpc("solo", rank=0, world_size=1)
with gradviz.trace(engine="torch") as tr:
    y = rpc.rpc_sync("solo", scaled, args=(torch.ones(2, requires_grad=True),))
rpc.shutdown()
json.dump(tr.to_dict()["unseen"], sys.stdout)
"""


def test_rpc_started_before_the_trace_leaves_the_served_calls_listed_as_unseen():
    # a fresh interpreter: the RPC agent keeps the served-call function it found at init_rpc, and in this test
    # process an earlier trace may have wrapped it already
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    result = subprocess.run([sys.executable, "-c", STARTED_BEFORE], cwd=REPO, env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert [(e["kind"], e["what"], e["how"]) for e in json.loads(result.stdout)] == \
        [("thread", "RPC calls this process served", "torch.distributed.rpc (started before the trace)")]
