"""Two trees of gradviz side by side in one run: the engine's MLP step and per-op chain, untraced and traced
(gradviz's engine and real PyTorch, ``gradviz.trace()`` in full), before and after a change.

    git archive <commit> gradviz | tar -x -C /tmp/before
    python benchmarks/bench_engine_ab.py --before /tmp/before [--after .] [--turns 7]
    python benchmarks/bench_engine_ab.py --before /tmp/before --tree /tmp/mid1 --tree /tmp/mid2 --calls --turns 1

``--tree`` adds trees between the two (in the order given: commits in between, to find which one cost what).
``--calls`` also counts the Python function calls of one call of each case (cProfile's total, per op or per step)
after its warm-up: deterministic, so unchanged by the load of a shared machine, where CPU time still varies.

Each turn runs every case once per tree, in a fresh process that imports gradviz from that tree (its folder first
on PYTHONPATH; the child prints which gradviz it loaded), alternating which tree goes first. A case's figure for a
turn is the median of its timed calls (CPU time of the thread: steadier on a shared machine); the table gives the
median over turns and the after/before ratio.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CASES = {  # name -> (calls timed, warm-up calls)
    "mlp step, ops (784-256-128-10, batch 64)": (15, 5),
    "mlp step, nn+optim": (15, 5),
    "chain of 2000 ops fwd+bwd, per op": (5, 2),
    "traced: tiny step (8-32-1), per step": (15, 3),
    "traced: mlp step, nn+optim": (15, 3),
    "traced: chain of 2000 ops fwd+bwd, per op": (7, 2),
    "traced torch: chain of 2000 ops fwd+bwd, per op": (7, 2),
    "traced torch: mlp step": (15, 3),
}
TINY_STEPS = 20  # tiny steps per timed call: one trace start and stop shared by them


def child(case, calls=False):
    import time

    sys.path.insert(0, str(HERE))
    import bench_engine
    import common
    import mlp

    import gradviz

    if case.startswith("traced"):
        fn, per = traced_case(case)
    elif case.startswith("mlp"):
        x, y = mlp.make_data()
        make = mlp.gradviz_ops_step if "ops" in case else mlp.gradviz_nn_step
        fn, per = make(mlp.make_params(), x, y), 1
    else:
        fn, per = bench_engine.chain_contenders(bench_engine.CHAIN_LENGTH)["gradviz fwd+bwd"], bench_engine.CHAIN_LENGTH
    timed, warmup = CASES[case]
    samples = common.run_rounds({case: fn}, rounds=timed, inner=1, warmup=warmup, clock=time.thread_time)[case]
    result = {"gradviz": gradviz.__file__, "seconds": statistics.median(samples) / per}
    if calls:
        result["calls"] = count_calls(fn) / per
    print(json.dumps(result))


def count_calls(fn):
    """The Python and builtin function calls one call of ``fn`` makes (after the warm-up: caches filled)."""
    import cProfile
    import pstats

    profile = cProfile.Profile()
    profile.runcall(fn)
    return pstats.Stats(profile).total_calls


def traced_case(case):
    """A traced case: (the timed call, how many units it is); the trace starts and stops inside the call."""
    import bench_engine
    import bench_torch
    import bench_trace
    import mlp

    import gradviz

    engine = "torch" if case.startswith("traced torch") else "gradviz"
    if "tiny" in case:
        step, per, steps = bench_trace.tiny_step(), 1, TINY_STEPS
    elif "chain" in case and engine == "torch":
        step, per, steps = bench_torch.chain_loop(), bench_torch.CHAIN_LENGTH, 1
    elif "chain" in case:
        contenders = bench_engine.chain_contenders(bench_engine.CHAIN_LENGTH)
        step, per, steps = contenders["gradviz fwd+bwd"], bench_engine.CHAIN_LENGTH, 1
    elif engine == "torch":
        step, per, steps = bench_torch.mlp_loop(1), 1, 1
    else:
        x, y = mlp.make_data()
        step, per, steps = mlp.gradviz_nn_step(mlp.make_params(), x, y), 1, 1

    def traced():
        with gradviz.trace(engine=engine):
            for _ in range(steps):
                step()

    return traced, per * steps


def measure(tree, case, calls=False):
    """(seconds per unit, calls per unit or None) of ``case`` in a fresh process importing ``tree``'s gradviz."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, __file__, "--child", case, *(["--calls"] if calls else [])], env=env,
                         capture_output=True, text=True, check=True).stdout
    result = json.loads(out.strip().splitlines()[-1])
    loaded = Path(result["gradviz"]).resolve().parent.parent
    if loaded != Path(tree).resolve():
        raise SystemExit(f"the child loaded gradviz from {loaded}, not {tree}")
    return result["seconds"], result.get("calls")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", help="the folder holding the 'before' tree's gradviz package")
    parser.add_argument("--after", default=str(HERE.parent), help="the 'after' tree (default: this checkout)")
    parser.add_argument("--tree", action="append", default=[], help="a tree between the two (repeatable)")
    parser.add_argument("--turns", type=int, default=7)
    parser.add_argument("--only", default="", help="run the cases whose name contains this text")
    parser.add_argument("--calls", action="store_true", help="also count each case's Python calls per unit")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child, args.calls)
        return
    if not args.before:
        parser.error("--before FOLDER is required")
    names = ["before", *(Path(t).name for t in args.tree), "after"]
    trees = dict(zip(names, [args.before, *args.tree, args.after]))
    if len(trees) != len(names):
        parser.error("each --tree needs a folder name of its own")
    cases = [case for case in CASES if args.only in case]
    figures = {(case, which): [] for case in cases for which in trees}
    calls = {}
    for turn in range(args.turns):
        order = list(trees) if turn % 2 == 0 else list(reversed(trees))
        for case in cases:
            for which in order:
                seconds, count = measure(trees[which], case, args.calls and turn == 0)
                figures[case, which].append(seconds)
                if count is not None:
                    calls[case, which] = count
                print(f"turn {turn + 1}: {case}, {which}: {seconds:.6g} s", file=sys.stderr,
                      flush=True)  # each figure as it comes: a long run on a loaded machine shows where it is
    print(f"{args.turns} turns, each case once per tree per turn (median of its timed calls, thread CPU time)")
    for case in cases:
        unit, scale = ("µs", 1e6) if "per op" in case or "tiny" in case else ("ms", 1e3)
        per = "op" if "per op" in case else "step"
        print(f"\n{case}")
        head = f"  {'tree':12}  {'CPU':>10}  {'/before':>8}"
        print(head + (f"  {'calls/' + per:>11}  {'/before':>8}" if calls else ""))
        base = statistics.median(figures[case, "before"])
        for which in trees:
            median = statistics.median(figures[case, which])
            line = f"  {which:12}  {median * scale:8.2f}{unit}  {median / base:7.3f}×"
            if calls:
                line += f"  {calls[case, which]:11.1f}  {calls[case, which] / calls[case, 'before']:7.3f}×"
            print(line)


if __name__ == "__main__":
    main()
