"""Cost of tracing a 2-rank DDP job: per training step and per rank, traced against untraced, and against one
traced process.

    python benchmarks/bench_ddp.py [--rounds R] [--steps K]

Four pairs of contenders (untraced, traced), each a fresh run of ``ddp_workload.py`` (an MLP step,
784-256-128-10, batch 64 per process, SGD), run in rounds in an order rotated each round (the machine's noise hits
all alike):

- ``single``: ``python ddp_workload.py single``, one process, no DDP; traced: ``gradviz run -q --no-render``;
- ``single x2``: two such processes at once (``torch.distributed.run --nproc-per-node 2 ... single``: no process
  group, no DDP), sharing the two cores as two ranks do; traced: ``gradviz torchrun``;
- ``ddp 1 rank``: DDP in a one-rank gloo group (``--nproc-per-node 1``): DDP's reducer, no second process;
- ``ddp 2 ranks``: DDP on 2 gloo ranks (``--nproc-per-node 2``), the job the issue is about.

Each process times its own steps after a warm-up (start-up, the launcher and the report are paid once per job and
left out), in wall time, in its main thread's CPU time (steadier on a shared machine: it leaves out waiting for
the other rank and for a core) and in its whole process's CPU time (gloo's threads included); a job's figure is
its slowest process's median step; the tables give the median over rounds. Every process runs one intra-op
thread (``OMP_NUM_THREADS=1``).

Both traced contenders of a pair run with gradviz's defaults (light iterations with full ones scheduled: the
ranks of ``gradviz torchrun`` record the same iterations as ``gradviz run``), so the timed steps are light ones
but for the scheduled full ones (iterations 16, 32, 64 among the timed 10..K+9), which a median passes over.
The issue's target: the traced 2-rank step costs no more than the single traced process's step. What the trace
adds per step (traced minus untraced, same pair) is printed for each pair: the part of the difference that is
gradviz's; the rest is DDP's own (the reducer, the all-reduce) and two processes sharing two cores.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import common  # noqa: E402

WORKLOAD = str(HERE / "ddp_workload.py")
CLOCKS = {"cpu": "main thread's CPU time", "process": "process CPU time (all threads)", "wall": "wall time"}
REPO = str(HERE.parent)


def commands(steps, prefix):
    gradviz = [sys.executable, "-m", "gradviz"]
    quiet = ["-q", "--no-render", "--fail-on", "never", "--out", prefix + "-out"]
    torchrun = [sys.executable, "-m", "torch.distributed.run"]

    def job(n, mode):
        launch = ["--standalone", "--nproc-per-node", str(n)]
        return ([*torchrun, *launch, WORKLOAD, mode, str(steps), prefix],
                [*gradviz, "torchrun", *quiet, *launch, WORKLOAD, mode, str(steps), prefix])

    return {
        "single": ([sys.executable, WORKLOAD, "single", str(steps), prefix],
                   [*gradviz, "run", *quiet, WORKLOAD, "single", str(steps), prefix]),
        "single x2": job(2, "single"),
        "ddp 1 rank": job(1, "ddp"),
        "ddp 2 ranks": job(2, "ddp"),
    }


def spread_range(values):
    """(max - min) / median: how far apart a few rounds were (the interquartile range needs four or more)."""
    return (max(values) - min(values)) / common.median(values)


def run_once(name, command, prefix):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{name} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    folder = Path(prefix).parent
    files = list(folder.glob(Path(prefix).name + "-rank*.json"))
    ranks = [json.loads(p.read_text()) for p in files]
    for p in files:
        p.unlink()
    return {clock: max(r[clock] for r in ranks) for clock in CLOCKS}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args()
    samples = {}
    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "step")
        pairs = commands(args.steps, prefix)
        contenders = {}
        for name, (untraced, traced) in pairs.items():
            contenders[name], contenders[name + " traced"] = untraced, traced
        names = list(contenders)
        for r in range(args.rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:
                samples.setdefault(name, []).append(run_once(name, contenders[name], prefix))
    print(common.machine_info())
    for clock, clock_name in CLOCKS.items():
        values = {name: [s[clock] for s in samples[name]] for name in names}
        med = {name: common.median(v) for name, v in values.items()}
        rows = [[name, common.format_time(med[name]), f"{spread_range(values[name]) * 100:.0f}%",
                 common.ratio_text(med[name], med["single"]), common.ratio_text(med[name], med["single traced"])]
                for name in names]
        print()
        print(common.table(f"MLP training step, {clock_name}, median over {args.rounds} rounds of {args.steps} "
                           f"steps (slowest process)", rows,
                           ["contender", "per step", "range", "vs single", "vs single traced"]))
        for name in pairs:
            added = med[name + " traced"] - med[name]
            print(f"  the trace adds to `{name}`: {added * 1e3:+.3f} ms a step "
                  f"({med[name + ' traced'] / med[name]:.2f}×)")
        print(f"  traced 2-rank step / traced single step: {med['ddp 2 ranks traced'] / med['single traced']:.2f}×; "
              f"/ traced single x2 step: {med['ddp 2 ranks traced'] / med['single x2 traced']:.2f}×; "
              f"untraced 2-rank step / untraced single step: {med['ddp 2 ranks'] / med['single']:.2f}×")


if __name__ == "__main__":
    main()
