"""What a picture costs, as multiples of one training step: torchviz against gradviz, on real PyTorch.

    python benchmarks/bench_picture_cost.py --rounds 5          # mlp, transformer, cnn
    python benchmarks/bench_picture_cost.py --models mlp --rounds 9
    python benchmarks/bench_picture_cost.py --format png --rounds 5     # gradviz's pictures as PNG
    python benchmarks/bench_picture_cost.py --format png --rounds 6 --turns 3 --baseline /tmp/base   # A/B
    python benchmarks/bench_picture_cost.py --chain 10000 --rounds 3 --baseline /tmp/base   # gradviz run's CPU

For each model (CPU, float32, torch intra-op threads 1, SGD), in one process, in rounds whose order rotates:

- **step**: one training step (zero_grad, forward, loss, backward, optimizer step), untraced;
- **torchviz**: ``make_dot(loss, params=named_parameters)`` of a fresh forward's loss, then ``pipe("svg")``
  (torchviz's graph walk and Graphviz's layout: what ``make_dot(...).render()`` costs);
- **gradviz file**: the picture ``gradviz run`` writes, from the traced document of one step
  (``artifacts.write_picture``: build, DOT, ``dot -Tsvg``): the like of torchviz's one picture;
- **gradviz run**: everything ``gradviz run`` draws once the step is traced: ``artifacts.write_all`` with pictures
  less the same call with ``draw=False`` (report.json and report.html are written by both; the difference is the
  picture files and the page's views: the overview and every box's inside).

``--baseline CHECKOUT`` (without ``--chain``) times only gradviz's drawing step (``write_all`` with pictures less
without) on each model, this checkout and the baseline's alternately, ``--turns`` fresh processes each.

``--chain N`` times ``gradviz run`` (a fresh process each, ``--engine gradviz``) on a script multiplying a
tensor N times in a chain, with pictures and with ``--no-render``, this checkout and ``--baseline``'s alternately.

Each figure is CPU time: the process's (every thread) plus its ``dot`` children's, so the load other sessions
put on a shared machine moves it less than wall time. The median over rounds is printed, with each cost as a
multiple of the step's median. Tracing itself is not counted (``bench_trace.py`` measures it).
"""

import argparse
import os
import resource
import shutil
import statistics
import sys
import tempfile

if "--drawing-only" not in sys.argv:  # (a --baseline turn imports the gradviz its PYTHONPATH names)
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's gradviz


def cpu():
    """Seconds of CPU so far: this process's threads and its waited-for children (``dot``), to the microsecond
    (``os.times`` counts in 10 ms ticks)."""
    mine, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return mine.ru_utime + mine.ru_stime + children.ru_utime + children.ru_stime


def mlp():
    """784-256-128-10, batch 64, cross-entropy (benchmarks/mlp.py's workload)."""
    import torch
    from torch import nn

    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
    return model, torch.randn(64, 784), torch.randint(0, 10, (64,)), nn.functional.cross_entropy


def transformer():
    """A 2-layer TransformerEncoder (d_model 64, 4 heads, feed-forward 128) and a linear head, 8 × 16 tokens."""
    import torch
    from torch import nn

    layer = nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, dropout=0.0, batch_first=True)
    model = nn.Sequential(nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False), nn.Linear(64, 1))
    return model, torch.randn(8, 16, 64), torch.randn(8, 16, 1), nn.functional.mse_loss


def cnn():
    """Two conv-batchnorm-ReLU blocks with pooling and a linear head, 16 images 3 × 32 × 32, cross-entropy."""
    import torch
    from torch import nn

    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(32 * 8 * 8, 10))
    return model, torch.randn(16, 3, 32, 32), torch.randint(0, 10, (16,)), nn.functional.cross_entropy


MODELS = {"mlp": mlp, "transformer": transformer, "cnn": cnn}


def contenders(make, fmt="svg"):
    """{name: fn} for one model; each fn does the work once and returns nothing. ``fmt``: gradviz's pictures'
    format (torchviz's is SVG whatever it is)."""
    import torch
    from torchviz import make_dot

    import gradviz
    from gradviz.cli.artifacts import write_all, write_picture
    from gradviz.rendering.pictures import pictures_to_draw

    torch.manual_seed(0)
    model, x, y, loss_fn = make()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def step():
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()

    with gradviz.trace(engine="torch") as tr:
        step()
    doc = tr.to_dict()
    graph = pictures_to_draw(doc)[0].graph
    work = tempfile.mkdtemp(prefix="gradviz-bench-pictures-")

    def torchviz():
        make_dot(loss_fn(model(x), y), params=dict(model.named_parameters())).pipe(format="svg")

    def gradviz_file():
        write_picture(doc, os.path.join(work, f"picture.{fmt}"), fmt, graphs=[graph])

    def gradviz_run(draw):
        out = tempfile.mkdtemp(dir=work)
        write_all(dict(doc), out, fmt=fmt, draw=draw)
        shutil.rmtree(out, ignore_errors=True)

    return {"step": step, "torchviz": torchviz, "gradviz file": gradviz_file, "document": lambda: doc,
            "gradviz run": lambda: gradviz_run(True), "gradviz run, no pictures": lambda: gradviz_run(False)}, work


def measure(name, make, rounds, fmt="svg"):
    import torch

    torch.set_num_threads(1)
    fns, work = contenders(make, fmt)
    fns.pop("document")
    names = list(fns)
    for fn in fns.values():  # warm up: imports, caches, dot's first start
        fn()
    seconds = {key: [] for key in names}
    try:
        for round_ in range(rounds):
            shift = round_ % len(names)
            for key in names[shift:] + names[:shift]:
                repeat = 20 if key == "step" else 1  # a step is short: timed over 20 for the clock's sake
                start = cpu()
                for _ in range(repeat):
                    fns[key]()
                seconds[key].append((cpu() - start) / repeat)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    med = {key: statistics.median(values) for key, values in seconds.items()}
    drawing = statistics.median(a - b for a, b in zip(seconds["gradviz run"], seconds["gradviz run, no pictures"]))
    step = med["step"]
    return [name, f"{step * 1e3:.1f} ms", f"{med['torchviz'] * 1e3:.0f} ms ({med['torchviz'] / step:.1f}×)",
            f"{med['gradviz file'] * 1e3:.0f} ms ({med['gradviz file'] / step:.1f}×)",
            f"{drawing * 1e3:.0f} ms ({drawing / step:.1f}×)"]


CHAIN = """import gradviz
x = gradviz.randn(8, requires_grad=True)
h = x
for _ in range({steps}):
    h = h * 1.0001
h.sum().backward()
"""


def run_cpu(checkout, script, out, render):
    """CPU seconds of ``gradviz run`` (the process and its children, ``dot`` among them) from ``checkout``."""
    import subprocess

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-m", "gradviz", "run", "-q", "--engine", "gradviz", "--out", out]
                   + ([] if render else ["--no-render"]) + [script], env=dict(os.environ, PYTHONPATH=checkout),
                   check=True, cwd=os.path.dirname(script))  # (``-m`` puts the working folder first on sys.path)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def bench_chain(steps, rounds, baseline):
    work = tempfile.mkdtemp(prefix="gradviz-bench-chain-")
    script = os.path.join(work, "chain.py")
    with open(script, "w", encoding="utf-8") as f:
        f.write(CHAIN.format(steps=steps))
    checkouts = {"this": os.path.dirname(os.path.dirname(os.path.abspath(__file__)))}
    if baseline:
        checkouts["baseline"] = baseline
    runs = [(key, render) for key in checkouts for render in (True, False)]
    seconds = {run: [] for run in runs}
    try:
        for round_ in range(rounds):
            shift = round_ % len(runs)
            for key, render in runs[shift:] + runs[:shift]:
                out = tempfile.mkdtemp(dir=work)
                seconds[key, render].append(run_cpu(checkouts[key], script, out, render))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"gradviz run on a {steps:,}-op chain (gradviz's engine), CPU seconds with dot, medians of {rounds} "
          f"rounds; cores: {os.cpu_count()}; load average {os.getloadavg()[0]:.1f}")
    for key, path in checkouts.items():
        drawn, plain = (statistics.median(seconds[key, render]) for render in (True, False))
        print(f"{key:<9} {path}: with pictures {drawn:.2f} s, --no-render {plain:.2f} s, drawing {drawn - plain:.2f} s")


def drawing_only(fmt, rounds):
    """Print {model: median CPU seconds of the drawing step} as JSON, for ``--baseline``'s turns."""
    import json

    import torch

    torch.set_num_threads(1)
    from gradviz.cli.artifacts import write_all

    out = {}
    for name, make in MODELS.items():
        fns, work = contenders(make, fmt)
        times = {True: [], False: []}
        try:
            for round_ in range(rounds + 1):  # the first round warms up
                for draw in ((True, False) if round_ % 2 else (False, True)):
                    folder = tempfile.mkdtemp(dir=work)
                    start = cpu()
                    write_all(dict(fns["document"]()), folder, fmt=fmt, draw=draw)
                    if round_:
                        times[draw].append(cpu() - start)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        out[name] = statistics.median(times[True]) - statistics.median(times[False])
    import gradviz

    out["gradviz"] = os.path.dirname(os.path.dirname(os.path.abspath(gradviz.__file__)))  # which one ran
    print(json.dumps(out))


def bench_ab(fmt, rounds, turns, baseline):
    """The drawing step of this checkout and ``baseline``'s, in fresh processes, alternately."""
    import json
    import subprocess

    checkouts = {"this": os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "baseline": baseline}
    seen = {key: [] for key in checkouts}
    for turn in range(turns):
        for key in (list(checkouts) if turn % 2 == 0 else list(checkouts)[::-1]):
            done = subprocess.run([sys.executable, os.path.abspath(__file__), "--drawing-only", "--format", fmt,
                                   "--rounds", str(rounds)], env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                                      [checkouts[key]] + [p for p in [os.environ.get("PYTHONPATH")] if p])),
                                  capture_output=True, text=True, check=True)
            seen[key].append(json.loads(done.stdout.strip().splitlines()[-1]))
            if os.path.realpath(seen[key][-1]["gradviz"]) != os.path.realpath(checkouts[key]):
                raise SystemExit(f"{key}: gradviz came from {seen[key][-1]['gradviz']}, not {checkouts[key]}")
    print(f"drawing step ({fmt}), CPU ms with dot: median of {rounds} rounds per process, {turns} processes per "
          f"checkout, alternately; cores: {os.cpu_count()}; load average {os.getloadavg()[0]:.1f}")
    for key, path in checkouts.items():
        print(f"{key:<9} {path}: " + ", ".join(
            f"{name} " + "/".join(f"{turn[name] * 1e3:.0f}" for turn in seen[key]) for name in MODELS))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated: " + ", ".join(MODELS))
    parser.add_argument("--chain", type=int, help="time gradviz run on a chain of this many ops instead")
    parser.add_argument("--baseline", help="--chain: another checkout to time alongside")
    parser.add_argument("--format", default="svg", choices=("svg", "png", "pdf"), help="gradviz's pictures")
    parser.add_argument("--turns", type=int, default=3, help="--baseline: fresh processes per checkout")
    parser.add_argument("--drawing-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.chain:
        bench_chain(args.chain, args.rounds, args.baseline)
        return
    if args.drawing_only:
        drawing_only(args.format, args.rounds)
        return
    if args.baseline:
        bench_ab(args.format, args.rounds, args.turns, args.baseline)
        return
    import torch

    print(f"CPU seconds (process + dot), medians of {args.rounds} rounds; gradviz's pictures as {args.format}; "
          f"torch {torch.__version__}, 1 thread; "
          f"cores: {os.cpu_count()}; load average {os.getloadavg()[0]:.1f}")
    headers = ["model", "step", "torchviz", "gradviz file", "gradviz run (files + page)"]
    rows = [measure(name, MODELS[name], args.rounds, args.format) for name in args.models.split(",")]
    widths = [max(len(str(r[i])) for r in rows + [headers]) for i in range(len(headers))]
    for row in [headers] + rows:
        print("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)), flush=True)


if __name__ == "__main__":
    main()
