"""Size of report.html against the run: ``gradviz run`` on a chain of N ops (one graph of N+1 nodes).

Run: python benchmarks/bench_report_size.py [--nodes N] [--baseline PATH]. Prints report.json and report.html
sizes, wall time and peak memory of ``gradviz run -q``, for this checkout and, with ``--baseline``, for another
checkout of gradviz (e.g. ``git archive main | tar -x -C /tmp/base``) so before/after are measured alike.
report.html must grow with what it draws (the collapsed picture, the parameters, the diagnostics), not with N.
"""

import argparse
import os
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


def measure(checkout, script, out):
    """(seconds, peak RSS KiB, report.json bytes, report.html bytes) of one ``gradviz run -q``."""
    env = dict(os.environ, PYTHONPATH=checkout)
    started = time.perf_counter()
    # cwd: the script's folder, since ``python -m`` puts the working folder before PYTHONPATH on sys.path
    process = subprocess.Popen([sys.executable, "-m", "gradviz", "run", "-q", "--fail-on", "never", "--out", out,
                                script], env=env, cwd=os.path.dirname(script), stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    stderr = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)  # this child's own peak memory
    process.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - started
    if process.returncode != 0:
        raise SystemExit(f"gradviz run failed in {checkout}: {stderr.decode(errors='replace').strip()}")
    sizes = [os.path.getsize(os.path.join(out, name)) for name in ("report.json", "report.html")]
    return seconds, usage.ru_maxrss, *sizes


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=200_000, help="ops in the chain (default 200,000)")
    parser.add_argument("--baseline", help="another gradviz checkout to measure the same way, first")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        script = os.path.join(folder, "chain.py")
        with open(script, "w") as f:
            f.write(CHAIN.format(n=args.nodes))
        runs = ([("baseline", args.baseline)] if args.baseline else []) + [("this checkout", HERE)]
        print(f"chain of {args.nodes:,} ops; sizes and peak RSS in MiB")
        print(f"{'':14} {'seconds':>8} {'peak RSS':>9} {'report.json':>12} {'report.html':>12}")
        for name, checkout in runs:
            seconds, peak, json_size, html_size = measure(checkout, script, os.path.join(folder, name))
            print(f"{name:14} {seconds:8.1f} {peak / 1024:9.0f} {json_size / 2**20:12.2f} {html_size / 2**20:12.3f}")


if __name__ == "__main__":
    main()
