"""Start-up: wall and CPU time of ``gradviz --help`` and friends, each its own process, against another checkout.

    python benchmarks/bench_startup.py [--rounds R] [--baseline PATH] [--bytecode]

Each case runs as the ``gradviz`` console script does (``from gradviz.cli import main``) with this checkout, or
``--baseline``'s, first on ``PYTHONPATH``; checkouts and cases alternate within each round, and the figures are
medians over rounds: wall time, and CPU time (user + system of the process, from ``wait4``: steadier on a shared
machine). ``--bytecode`` lets Python cache compiled modules (in a temporary folder), as an installed gradviz
does; without it the environment decides (``PYTHONDONTWRITEBYTECODE=1`` compiles every module on every run).
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLI = "import sys; from gradviz.cli import main; sys.argv[0] = 'gradviz'; sys.exit(main())"
CASES = {
    "gradviz --help": [CLI, "--help"],
    "gradviz run --help": [CLI, "run", "--help"],
    "gradviz --version": [CLI, "--version"],
    "import gradviz": ["import gradviz"],
    "import gradviz; gradviz.zeros(1)": ["import gradviz; gradviz.zeros(1)"],
}


def run_once(checkout, argv, env, cwd):
    start = time.perf_counter()
    # run from an empty folder: `python -c` puts the current folder first on sys.path, before PYTHONPATH
    proc = subprocess.Popen([sys.executable, "-c", *argv], env=dict(env, PYTHONPATH=checkout), cwd=cwd,
                            stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"bench_startup: `{' '.join(argv)}` failed in {checkout}")
    return wall, usage.ru_utime + usage.ru_stime


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--baseline", help="another checkout of gradviz to compare with")
    parser.add_argument("--bytecode", action="store_true", help="cache compiled modules, as an installed gradviz")
    args = parser.parse_args()
    checkouts = {"this": HERE} | ({"baseline": os.path.abspath(args.baseline)} if args.baseline else {})
    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as cwd:
        if args.bytecode:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = cache
        times = {(who, case): [] for who in checkouts for case in CASES}
        for round_ in range(args.rounds + 1):  # round 0 warms the disk and bytecode caches, untimed
            for who, checkout in checkouts.items():
                for case, argv in CASES.items():
                    sample = run_once(checkout, argv, env, cwd)
                    if round_:
                        times[who, case].append(sample)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, {args.rounds} rounds, bytecode "
          f"{'cached' if args.bytecode else 'as the environment says'}"
          f"{' (PYTHONDONTWRITEBYTECODE=1)' if env.get('PYTHONDONTWRITEBYTECODE') else ''}")
    print(f"{'checkout':9} {'case':34} {'wall ms':>8} {'cpu ms':>7}")
    for (who, case), samples in times.items():
        wall = statistics.median(s[0] for s in samples) * 1000
        cpu = statistics.median(s[1] for s in samples) * 1000
        print(f"{who:9} {case:34} {wall:8.0f} {cpu:7.0f}")


if __name__ == "__main__":
    main()
