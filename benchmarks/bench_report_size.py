"""Size of the outputs against the run's length, for this checkout and, with ``--baseline``, another checkout of
gradviz (e.g. ``git archive main | tar -x -C /tmp/base``), so before/after are measured alike in one run.

Run: python benchmarks/bench_report_size.py [--case chain|reinforce|bert-png|all] [--baseline PATH] [options].

- ``chain`` (``--nodes N``): ``gradviz run -q`` on a chain of N ops (one graph of N+1 nodes): report.json and
  report.html sizes, wall time and peak memory. report.html must grow with what it draws, not with N.
- ``reinforce`` (``--episodes E``): a REINFORCE-style loop (pytorch/examples' reinforce.py cut down: a policy
  network, one graph per episode as long as the episode, 5-204 steps, so a new graph shape per episode),
  ``gradviz run`` once with ``--no-render`` and once drawing SVG pictures: sizes, wall times (the difference is
  the drawing), pictures drawn and the terminal report's lines.
- ``bert-png``: a tiny BERT-like model on real PyTorch, ``gradviz run --engine torch --format png``: wall time,
  PNGs written and skipped.
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


REINFORCE = """\
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(0)
torch.manual_seed(0)
policy = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 2))
opt = torch.optim.Adam(policy.parameters(), lr=1e-2)
for episode in range({episodes}):
    log_probs = []
    for t in range(5 + int(rng.integers(0, 200))):
        state = torch.tensor(rng.standard_normal(4), dtype=torch.float32)
        log_probs.append(F.log_softmax(policy(state), dim=-1)[int(rng.integers(0, 2))])
    returns = torch.tensor(rng.standard_normal(len(log_probs)), dtype=torch.float32)
    loss = -(torch.stack(log_probs) * returns).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""
BERT = os.path.join(HERE, "benchmarks", "tiny_bert.py")


def run(checkout, script, out, *options):
    """(seconds, peak RSS KiB, stdout lines, stderr text) of one ``gradviz run``."""
    env = dict(os.environ, PYTHONPATH=checkout, COLUMNS="100")
    os.makedirs(out, exist_ok=True)
    streams = [open(os.path.join(out, f"..{name}.txt"), "w+b") for name in ("stdout", "stderr")]
    started = time.perf_counter()
    # cwd: the script's folder, since ``python -m`` puts the working folder before PYTHONPATH on sys.path
    process = subprocess.Popen([sys.executable, "-m", "gradviz", "run", "--fail-on", "never", "--out", out,
                                *options, script], env=env, cwd=os.path.dirname(script), stdout=streams[0],
                               stderr=streams[1])
    _, status, usage = os.wait4(process.pid, 0)  # this child's own peak memory
    seconds = time.perf_counter() - started
    texts = []
    for stream in streams:
        stream.seek(0)
        texts.append(stream.read().decode(errors="replace"))
        stream.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"gradviz run failed in {checkout}: {texts[1].strip()}")
    return seconds, usage.ru_maxrss, texts[0].splitlines(), texts[1]


def measure(checkout, script, out):
    """(seconds, peak RSS KiB, report.json bytes, report.html bytes) of one ``gradviz run -q``."""
    seconds, peak, _, _ = run(checkout, script, out, "-q")
    return seconds, peak, *sizes(out)


def sizes(out):
    return [os.path.getsize(os.path.join(out, name)) for name in ("report.json", "report.html")]


def pictures(out, suffix):
    return sum(1 for name in os.listdir(out) if name.startswith("structure-") and name.endswith(suffix))


def chain_case(args, folder, runs):
    script = os.path.join(folder, "chain.py")
    with open(script, "w") as f:
        f.write(CHAIN.format(n=args.nodes))
    print(f"chain of {args.nodes:,} ops; sizes and peak RSS in MiB")
    print(f"{'':14} {'seconds':>8} {'peak RSS':>9} {'report.json':>12} {'report.html':>12}")
    for name, checkout in runs:
        seconds, peak, json_size, html_size = measure(checkout, script, os.path.join(folder, name, "chain"))
        print(f"{name:14} {seconds:8.1f} {peak / 1024:9.0f} {json_size / 2**20:12.2f} {html_size / 2**20:12.3f}")


def reinforce_case(args, folder, runs):
    script = os.path.join(folder, "reinforce.py")
    with open(script, "w") as f:
        f.write(REINFORCE.format(episodes=args.episodes))
    print(f"\nREINFORCE-style, {args.episodes:,} episodes of 5-204 steps on gradviz's engine (--torch); "
          "sizes in MiB, times in s")
    print(f"{'':14} {'no-render s':>11} {'render s':>9} {'drawing s':>10} {'pictures':>9} {'report.json':>12} "
          f"{'report.html':>12} {'lines':>6}")
    for name, checkout in runs:
        out = os.path.join(folder, name, "reinforce")
        plain, _, _, _ = run(checkout, script, out + "-nr", "--torch", "--no-render")
        drawn, _, lines, _ = run(checkout, script, out, "--torch")
        json_size, html_size = sizes(out)
        print(f"{name:14} {plain:11.1f} {drawn:9.1f} {drawn - plain:10.1f} {pictures(out, '.svg'):9d} "
              f"{json_size / 2**20:12.2f} {html_size / 2**20:12.3f} {len(lines):6d}")


def bert_case(args, folder, runs):
    print("\ntiny BERT-like model (2 layers, ~130 nodes a graph) on real PyTorch, --format png")
    print(f"{'':14} {'seconds':>8} {'PNGs':>5} {'skipped':>8}  largest PNG")
    for name, checkout in runs:
        out = os.path.join(folder, name, "bert")
        seconds, _, _, stderr = run(checkout, BERT, out, "--engine", "torch", "--format", "png")
        pngs = [os.path.join(out, n) for n in os.listdir(out) if n.endswith(".png")]
        largest = max(pngs, key=os.path.getsize, default=None)
        shape = ""
        if largest:
            with open(largest, "rb") as f:
                head = f.read(24)
            shape = f"{int.from_bytes(head[16:20], 'big')} x {int.from_bytes(head[20:24], 'big')} px, " \
                    f"{os.path.getsize(largest) / 2**20:.2f} MiB"
        skipped = stderr.count("skipped picture")
        print(f"{name:14} {seconds:8.1f} {len(pngs):5d} {skipped:8d}  {shape}")
    raster_steps(os.path.join(folder, runs[-1][0], "bert", "report.json"), args.repeat)


def raster_steps(report, repeat):
    """On the first graph of ``report``: one ``dot -Tpng`` (layout and pixels at 96 dpi) against this
    checkout's two steps (``dot -Tdot`` layout, then drawing that layout capped at MAX_PIXELS), the same DOT
    source, interleaved, medians of ``repeat``."""
    import statistics

    sys.path.insert(0, HERE)
    from gradviz import load_trace
    from gradviz.rendering import build_graph, raster, to_dot
    from gradviz.rendering.layout import run_dot

    doc = load_trace(report)
    graph = doc["graphs"][0]["id"]
    source = to_dot(build_graph(doc, graphs=[graph]))
    times = {"dot -Tpng": [], "layout (-Tdot)": [], "drawing (-n2)": []}
    for _ in range(repeat):
        started = time.perf_counter()
        run_dot(source, "png", 120)
        times["dot -Tpng"].append(time.perf_counter() - started)
        started = time.perf_counter()
        laid = run_dot(source, "dot", 120).decode()
        times["layout (-Tdot)"].append(time.perf_counter() - started)
        started = time.perf_counter()
        raster.draw(laid, "png", 120)
        times["drawing (-n2)"].append(time.perf_counter() - started)
    print(f"  graph {graph} ({len(doc['graphs'][0]['nodes'])} nodes), wall medians of {repeat}: " + ", ".join(
        f"{step} {statistics.median(values):.2f} s" for step, values in times.items())
        + f"; drawn at {raster.resolution(laid)} dpi")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--case", choices=["chain", "reinforce", "bert-png", "all"], default="chain")
    parser.add_argument("--nodes", type=int, default=200_000, help="ops in the chain (default 200,000)")
    parser.add_argument("--episodes", type=int, default=1000, help="REINFORCE episodes (default 1,000)")
    parser.add_argument("--repeat", type=int, default=5, help="repeats of the PNG steps (default 5)")
    parser.add_argument("--baseline", help="another gradviz checkout to measure the same way, first")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        runs = ([("baseline", args.baseline)] if args.baseline else []) + [("this checkout", HERE)]
        if args.case in ("chain", "all"):
            chain_case(args, folder, runs)
        if args.case in ("reinforce", "all"):
            reinforce_case(args, folder, runs)
        if args.case in ("bert-png", "all"):
            bert_case(args, folder, runs)


if __name__ == "__main__":
    main()
