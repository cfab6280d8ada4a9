"""Cost of tracing: the MLP training step untraced, traced, and traced with every diagnostic computed.

    python benchmarks/bench_trace.py [--quick] [--steps K] [--threads N]

Each timed sample is a loop of K training steps (gradviz.nn + gradviz.optim, as a user writes it): untraced;
inside ``with gradviz.trace():``; and inside the trace followed by ``tr.diagnostics`` (every rule run over the
trace document). Starting and stopping the trace, and the diagnostics, are on the clock, shared by K steps.
Target (issue 3): the traced step at most 1.25× the untraced one.
"""

import argparse
import sys
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

    return {"untraced": untraced_loop, "trace": traced_loop, "trace + diagnostics": diagnosed_loop}, found


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="few rounds: a smoke run, not a measurement")
    parser.add_argument("--steps", type=int, default=20, help="training steps per traced loop (default 20)")
    parser.add_argument("--threads", type=int, default=1, help="BLAS threads for numpy (default 1)")
    args = parser.parse_args(argv)
    rounds = 4 if args.quick else 25

    if not mlp.gradviz_nn_available():
        sys.exit("bench_trace needs gradviz.nn and gradviz.optim")
    with common.matched_threads(args.threads) as note:
        print(note)
        print(common.machine_info())
        print()
        fns, found = contenders(args.steps)
        samples = common.run_rounds(fns, rounds=rounds, inner=1, warmup=2)
    base = common.median(samples["untraced"]) / args.steps
    rows = []
    for name, s in samples.items():
        per_step = common.median(s) / args.steps
        rows.append([name, common.format_time(per_step), f"±{common.spread(s) * 50:.0f}%",
                     common.ratio_text(per_step, base)])
    title = (f"MLP training step (gradviz.nn + optim.SGD), loops of {args.steps} steps, {rounds} rounds: "
             "median time per step, trace start/stop and diagnostics included")
    print(common.table(title, rows, ["contender", "per step", "iqr/2", "vs untraced"]))
    diags = found.get("diagnostics") or []
    codes = sorted({getattr(d, "code", None) or (d.get("code") if isinstance(d, dict) else str(d)) for d in diags})
    print(f"diagnostics on the correct loop: {len(diags)} {codes if codes else '(none, as expected)'}")


if __name__ == "__main__":
    main()
