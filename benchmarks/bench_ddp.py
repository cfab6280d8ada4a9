"""Cost of tracing a 2-rank DDP job: per training step, traced against untraced, and against one traced process.

    python benchmarks/bench_ddp.py [--rounds R] [--steps K]

Four contenders, each a fresh run of ``ddp_workload.py`` (an MLP step, 784-256-128-10, batch 64, SGD), run in
rounds in an order rotated each round (the machine's noise hits all alike):

- ``single``: ``python ddp_workload.py single``, one process, no DDP;
- ``single traced``: ``gradviz run -q --no-render`` on it;
- ``ddp 2 ranks``: ``python -m torch.distributed.run --standalone --nproc-per-node 2`` (gloo, CPU);
- ``ddp 2 ranks traced``: ``gradviz torchrun -q --no-render --standalone --nproc-per-node 2``.

Each process times its own steps after a warm-up (start-up, the launcher and the report are paid once per job and
left out), in wall time and in its main thread's CPU time (steadier on a shared machine: it leaves out waiting for
the other rank and for a core); a job's figure is its slowest rank's median step; the tables give the median over
rounds. Every
process runs one intra-op thread (``OMP_NUM_THREADS=1``): two ranks use the two cores the single process leaves
half idle, so the DDP step also pays the all-reduce and any contention with other work on the machine.
Both traced contenders run with gradviz's defaults (light iterations with full ones scheduled: the ranks of
``gradviz torchrun`` record the same iterations as ``gradviz run``), so the timed steps are light ones but for the
scheduled full ones (iterations 16, 32, 64 among the timed 10..K+9), which a median passes over.
The issue's target: the traced 2-rank step costs no more than the single traced process's step.
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
    torchrun = ["--standalone", "--nproc-per-node", "2"]
    return {
        "single": [sys.executable, WORKLOAD, "single", str(steps), prefix],
        "single traced": [*gradviz, "run", "-q", "--no-render", "--fail-on", "never", "--out", prefix + "-out",
                          WORKLOAD, "single", str(steps), prefix],
        "ddp 2 ranks": [sys.executable, "-m", "torch.distributed.run", *torchrun, WORKLOAD, "ddp", str(steps), prefix],
        "ddp 2 ranks traced": [*gradviz, "torchrun", "-q", "--no-render", "--fail-on", "never", "--out",
                               prefix + "-out", *torchrun, WORKLOAD, "ddp", str(steps), prefix],
    }


def run_once(name, command, prefix):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{name} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    folder = Path(prefix).parent
    ranks = [json.loads(p.read_text()) for p in folder.glob(Path(prefix).name + "-rank*.json")]
    for p in folder.glob(Path(prefix).name + "-rank*.json"):
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
        contenders = commands(args.steps, prefix)
        names = list(contenders)
        for r in range(args.rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:
                samples.setdefault(name, []).append(run_once(name, contenders[name], prefix))
    print(common.machine_info())
    for clock, clock_name in CLOCKS.items():
        values = {name: [s[clock] for s in runs] for name, runs in samples.items()}
        med = {name: common.median(v) for name, v in values.items()}
        rows = [[name, common.format_time(med[name]), f"±{common.spread(values[name]) * 50:.0f}%",
                 common.ratio_text(med[name], med["single"]), common.ratio_text(med[name], med["single traced"])]
                for name in values]
        print()
        print(common.table(f"MLP training step, {clock_name}, median over {args.rounds} rounds of {args.steps} "
                           f"steps (slowest rank)", rows,
                           ["contender", "per step", "spread", "vs single", "vs single traced"]))
        print(f"traced/untraced: single {med['single traced'] / med['single']:.2f}×, "
              f"2-rank DDP {med['ddp 2 ranks traced'] / med['ddp 2 ranks']:.2f}×; "
              f"traced 2-rank step / traced single step: {med['ddp 2 ranks traced'] / med['single traced']:.2f}×")


if __name__ == "__main__":
    main()
