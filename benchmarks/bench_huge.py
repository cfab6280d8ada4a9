"""Huge runs: time and peak memory of ``gradviz run --no-render`` against the plain ``python`` run of one script.

    python benchmarks/bench_huge.py [--nodes N] [--case chain|tensor|all] [--repeat R] [--baseline PATH]

``chain``: one graph of N ops (``y = y * 1.0000001`` N times on a (4,) tensor, then backward), the issue 9
case (target: traced at most 4x the time and 3x the peak memory of the plain run, report.json bounded).
``tensor``: a 512 MiB float32 tensor through a broadcasting op and backward (target: traced peak memory within
1.3x the plain run: the NaN/Inf check and the gradient norms must not copy it). Each run is its own process; peak
memory is that process's own maximum resident set (``wait4``), time is the whole process's (start-up included), as
wall time and as CPU time (user + system: steadier than wall time on a shared machine). With ``--repeat`` the
median of R runs of each, plain and traced alternating.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHAIN = """\
import gradviz

x = gradviz.ones(4, requires_grad=True)
y = x
for _ in range({n}):
    y = y * 1.0000001
y.sum().backward()
"""
# 2**27 float32 = 512 MiB. ``x * w`` broadcasts w (1, 1024) over x's rows, so w's gradient arrives summed but
# the gradient flowing into the product is the broadcast ones of sum(): a stride-0 view of one element.
TENSOR = """\
import numpy as np
import gradviz

x = gradviz.tensor(np.ones((2**17, 1024), dtype=np.float32), requires_grad=True)
w = gradviz.ones(1, 1024, requires_grad=True)
loss = (x * w).sum()
loss.backward()
"""


def run(argv, checkout, cwd):
    """(wall seconds, CPU seconds (user + system), peak RSS in bytes) of one process."""
    env = dict(os.environ, PYTHONPATH=checkout, OMP_NUM_THREADS="1")
    started = time.perf_counter()
    process = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    stderr = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {stderr.decode(errors='replace').strip()[-2000:]}")
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024


def measure(name, source, checkout, repeat, folder):
    script = os.path.join(folder, f"{name}.py")
    with open(script, "w") as f:
        f.write(source)
    out = os.path.join(folder, f"out-{name}")
    plain_argv = [sys.executable, script]
    traced_argv = [sys.executable, "-m", "gradviz", "run", "-q", "--no-render", "--fail-on", "never", "--out", out,
                   script]
    plain, traced = [], []
    for _ in range(repeat):
        plain.append(run(plain_argv, checkout, folder))
        traced.append(run(traced_argv, checkout, folder))
    medians = [statistics.median(run[i] for run in runs) for runs in (plain, traced) for i in range(3)]
    json_size = os.path.getsize(os.path.join(out, "report.json"))
    html_size = os.path.getsize(os.path.join(out, "report.html"))
    return (*medians, json_size, html_size)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=200_000, help="ops in the chain (default 200,000)")
    parser.add_argument("--case", choices=("chain", "tensor", "all"), default="all")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each, medians (default 1)")
    parser.add_argument("--baseline", help="another gradviz checkout to measure the same way, first")
    args = parser.parse_args()
    cases = []
    if args.case in ("chain", "all"):
        cases.append((f"chain of {args.nodes:,} ops", "chain", CHAIN.format(n=args.nodes)))
    if args.case in ("tensor", "all"):
        cases.append(("512 MiB tensor, broadcast gradient", "tensor", TENSOR))
    checkouts = ([("baseline", args.baseline)] if args.baseline else []) + [("this checkout", HERE)]
    mib = 2**20
    print("wall and CPU (user + system) seconds of the whole process, peak RSS; plain = python SCRIPT, traced = "
          "gradviz run --no-render SCRIPT")
    print(f"{'case':36} {'checkout':14} {'wall':>6} {'traced':>7} {'ratio':>6} {'CPU':>6} {'traced':>7} {'ratio':>6} "
          f"{'MiB':>6} {'traced':>7} {'ratio':>6} {'json MiB':>9} {'html MiB':>9}")
    with tempfile.TemporaryDirectory() as folder:
        for title, name, source in cases:
            for label, checkout in checkouts:
                p_t, p_c, p_m, t_t, t_c, t_m, js, hs = measure(name, source, checkout, args.repeat, folder)
                print(f"{title:36} {label:14} {p_t:6.2f} {t_t:7.2f} {t_t / p_t:5.2f}x {p_c:6.2f} {t_c:7.2f} "
                      f"{t_c / p_c:5.2f}x {p_m / mib:6.0f} {t_m / mib:7.0f} {t_m / p_m:5.2f}x {js / mib:9.2f} "
                      f"{hs / mib:9.3f}", flush=True)


if __name__ == "__main__":
    main()
