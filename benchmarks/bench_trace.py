"""Cost of tracing: the MLP training step untraced, traced, and traced with every diagnostic computed.

    python benchmarks/bench_trace.py [--quick] [--steps K] [--threads N] [--cpu]

Each timed sample is a loop of K training steps (gradviz.nn + gradviz.optim, as a user writes it): untraced;
inside ``with gradviz.trace():``; and inside the trace followed by ``tr.diagnostics`` (every rule run over the
trace document). Starting and stopping the trace, and the diagnostics, are on the clock, shared by K steps.
The same for a tiny MLP (8-32-1, batch 32, MSE, SGD), where the tracer's per-op cost is not hidden behind big
matmuls. Targets (issue 7): the MLP step traced at most 1.25× untraced, the tiny step at most 2×.
"""

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402
import mlp  # noqa: E402


def trace_factory():
    """``gradviz.trace`` once the tracer is exported; its recorder class until then."""
    import gradviz

    try:
        return gradviz.trace
    except (AttributeError, ImportError):
        from gradviz.tracing.recorder import Trace

        return Trace


def tiny_step():
    """A tiny regression step (8-32-1, batch 32, MSE, SGD): almost all of its time is per-op overhead."""
    import numpy as np

    import gradviz
    import gradviz.nn as nn
    import gradviz.optim as optim

    gradviz.manual_seed(0)
    rng = np.random.default_rng(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
    loss_fn = nn.MSELoss()
    opt = optim.SGD(model.parameters(), lr=0.01)
    x = gradviz.tensor(rng.standard_normal((32, 8)).astype(np.float32))
    y = gradviz.tensor(rng.standard_normal((32, 1)).astype(np.float32))

    def step():
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    return step


def contenders(steps):
    x, y = mlp.make_data()
    params = mlp.make_params()
    make_trace = trace_factory()
    plain = mlp.gradviz_nn_step(params, x, y)
    traced = mlp.gradviz_nn_step(params, x, y)
    diagnosed = mlp.gradviz_nn_step(params, x, y)
    found = {}

    def untraced_loop():
        for _ in range(steps):
            plain()

    def traced_loop():
        with make_trace():
            for _ in range(steps):
                traced()

    def diagnosed_loop():
        with make_trace() as tr:
            for _ in range(steps):
                diagnosed()
        found["diagnostics"] = tr.diagnostics

    tiny_plain = tiny_step()
    tiny_traced = tiny_step()

    def tiny_untraced_loop():
        for _ in range(steps):
            tiny_plain()

    def tiny_traced_loop():
        with make_trace():
            for _ in range(steps):
                tiny_traced()

    return {"untraced": untraced_loop, "trace": traced_loop, "trace + diagnostics": diagnosed_loop,
            "tiny untraced": tiny_untraced_loop, "tiny trace": tiny_traced_loop}, found


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="few rounds: a smoke run, not a measurement")
    parser.add_argument("--steps", type=int, default=20, help="training steps per traced loop (default 20)")
    parser.add_argument("--threads", type=int, default=1, help="BLAS threads for numpy (default 1)")
    parser.add_argument("--cpu", action="store_true",
                        help="time the CPU this thread got (time.thread_time), not wall time: steadier on a loaded "
                             "machine")
    args = parser.parse_args(argv)
    rounds = 4 if args.quick else 25

    if not mlp.gradviz_nn_available():
        sys.exit("bench_trace needs gradviz.nn and gradviz.optim")
    with common.matched_threads(args.threads) as note:
        print(note)
        print(common.machine_info())
        print()
        fns, found = contenders(args.steps)
        clock = time.thread_time if args.cpu else time.perf_counter
        samples = common.run_rounds(fns, rounds=rounds, inner=1, warmup=2, clock=clock)
    base = common.median(samples["untraced"]) / args.steps
    tiny_base = common.median(samples["tiny untraced"]) / args.steps
    rows = []
    for name, s in samples.items():
        per_step = common.median(s) / args.steps
        if name.startswith("tiny"):
            continue
        rows.append([name, common.format_time(per_step), f"±{common.spread(s) * 50:.0f}%",
                     common.ratio_text(per_step, base)])
    title = (f"MLP training step (gradviz.nn + optim.SGD), loops of {args.steps} steps, {rounds} rounds: "
             f"median {'CPU ' if args.cpu else ''}time per step, trace start/stop and diagnostics included")
    print(common.table(title, rows, ["contender", "per step", "iqr/2", "vs untraced"]))
    rows = []
    for name in ("tiny untraced", "tiny trace"):
        per_step = common.median(samples[name]) / args.steps
        rows.append([name, common.format_time(per_step), f"±{common.spread(samples[name]) * 50:.0f}%",
                     common.ratio_text(per_step, tiny_base)])
    print(common.table("Tiny MLP step (8-32-1, batch 32, MSELoss, SGD), same loops", rows,
                       ["contender", "per step", "iqr/2", "vs untraced"]))
    diags = found.get("diagnostics") or []
    codes = sorted({getattr(d, "code", None) or (d.get("code") if isinstance(d, dict) else str(d)) for d in diags})
    print(f"diagnostics on the correct loop: {len(diags)} {codes if codes else '(none, as expected)'}")


if __name__ == "__main__":
    main()
