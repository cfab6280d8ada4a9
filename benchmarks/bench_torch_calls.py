"""What one call costs on real PyTorch: untraced, under anomaly mode, and traced, with the layers of the trace apart.

    python benchmarks/bench_torch_calls.py [--rounds R] [--quick]

CPU time per call (``time.thread_time``: steady on a shared machine), medians over rounds in a rotated order, one
torch thread. The calls:

- ``usual op``: ``y = y * 1.0001`` on a chain from a leaf that requires grad (one new node per call), forward only;
- ``usual op + backward``: the same chain, then ``sum().backward()``, per op;
- ``op, no grad``: the same op on a tensor that needs no gradient (no node: the mode's floor plus a check);
- ``F.linear``: a 1x8 -> 8 linear layer chained on its own output (two nodes per call: the matmul and the
  weight's ``TBackward0``), then backward, per call;
- ``policy step``: one environment step of a REINFORCE episode (``Linear-ReLU-Linear-softmax`` policy, a
  validated ``Categorical``, ``sample``, ``log_prob``, ``.item()``), forward only.

The contenders: ``untraced``; ``anomaly`` (``torch.autograd.set_detect_anomaly(True)``); ``bare mode`` (a
``TorchFunctionMode`` that only calls through: the floor of any function-mode tracer); ``adapter, null builder``
(``gradviz.trace`` with a builder that records nothing, as in ``bench_trace_parts.py``: the adapter's own work);
``trace`` (the real tracer). Ratios are against ``untraced``; the per-call differences between rows are what
each layer costs.
"""

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402


def calls(torch):
    """name -> (function, calls per function run)."""
    from torch.distributions import Categorical

    torch.manual_seed(0)
    leaf = torch.randn(1, 8, requires_grad=True)
    plain = torch.randn(1, 8)
    layer = torch.nn.Linear(8, 8)
    policy = torch.nn.Sequential(torch.nn.Linear(4, 128), torch.nn.ReLU(), torch.nn.Linear(128, 2),
                                 torch.nn.Softmax(dim=1))

    def usual_op():
        y = leaf * 1.0
        for _ in range(200):
            y = y * 1.0001

    def usual_op_backward():
        y = leaf * 1.0
        for _ in range(200):
            y = y * 1.0001
        y.sum().backward()

    def no_grad_op():
        y = plain
        for _ in range(200):
            y = y * 1.0001

    def linear():
        y = leaf * 1.0
        for _ in range(50):
            y = torch.nn.functional.linear(y, layer.weight, layer.bias)
        y.sum().backward()

    def policy_step():
        for _ in range(10):
            probs = policy(torch.tensor([0.01, -0.02, 0.03, 0.0]).unsqueeze(0))
            m = Categorical(probs)
            action = m.sample()
            m.log_prob(action)
            action.item()

    return {"usual op": (usual_op, 201), "usual op + backward": (usual_op_backward, 201),
            "op, no grad": (no_grad_op, 200), "F.linear": (linear, 50), "policy step": (policy_step, 10)}


def contenders(torch, fn, state):
    from bench_torch import floor_modes
    from bench_trace_parts import null_builder_class

    import gradviz
    from gradviz.tracing import recorder

    Bare, _ = floor_modes()  # the mode that only calls through
    real = recorder.TraceBuilder
    null = null_builder_class()

    def setup(name):
        if name == "anomaly":
            torch.autograd.set_detect_anomaly(True)
        elif name == "bare mode":
            state["mode"] = Bare()
            state["mode"].__enter__()
        elif name in ("adapter, null builder", "trace"):
            recorder.TraceBuilder = null if name != "trace" else real
            try:
                state["trace"] = gradviz.trace(engine="torch").start()
            finally:
                recorder.TraceBuilder = real

    def teardown(name):
        torch.autograd.set_detect_anomaly(False)
        if state.get("mode") is not None:
            state.pop("mode").__exit__(None, None, None)
        if state.get("trace") is not None:
            state.pop("trace").stop()

    names = ["untraced", "anomaly", "bare mode", "adapter, null builder", "trace"]
    return {name: fn for name in names}, setup, teardown


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--quick", action="store_true", help="3 rounds")
    args = parser.parse_args()
    rounds = 3 if args.quick else args.rounds
    import torch

    torch.set_num_threads(1)
    print(common.machine_info())
    print(f"torch: {torch.__version__}, threads=1, CPU time per call, median of {rounds} rounds\n")
    for case, (fn, per_run) in calls(torch).items():
        state = {}
        fns, setup, teardown = contenders(torch, fn, state)
        samples = common.run_rounds(fns, rounds, inner=5, warmup=2, setup=setup, teardown=teardown,
                                    clock=time.thread_time)
        base = common.median(samples["untraced"]) / per_run
        rows = []
        for name, values in samples.items():
            per_call = common.median(values) / per_run
            rows.append([name, common.format_time(per_call), common.ratio_text(per_call, base),
                         f"+{(per_call - base) * 1e6:.1f} µs", f"{common.spread(values):.0%}"])
        print(common.table(case, rows, ["contender", "per call", "ratio", "added", "spread"]))
        print()


if __name__ == "__main__":
    main()
