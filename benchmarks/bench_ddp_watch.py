"""Cost of the torch adapter's DDP watcher (adapters/torch/ddp.py) on a DDP training step.

    python benchmarks/bench_ddp_watch.py [--quick] [--steps K] [--cpu] [--full]

One process, a one-rank gloo group (the watcher's work per forward, per parameter and per optimizer step does not
depend on the number of ranks; starting ranks would only add noise). The workload: an MLP (784-256-128-10, batch
64, float32, cross-entropy, SGD) wrapped in DistributedDataParallel, in loops of K steps. Three contenders,
interleaved in one run (common.py): untraced; ``gradviz.trace(engine="torch")`` with the DDP watcher switched off
(its ``install`` replaced by a no-op while that contender runs); the same trace with the watcher on. The trace is
started and stopped around each loop, on the clock. The figure to read is the ratio of the last two. The trace
uses the CLI's default schedule (light iterations after the first 3, sampled full ones); ``--full`` traces every
iteration in full (``gradviz run --full``).
"""

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402


def ddp_loop(steps):
    import torch
    import torch.nn as nn

    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(
        nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    x, y = torch.randn(64, 784), torch.randint(0, 10, (64,))

    def loop():
        for _ in range(steps):
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()

    return loop


def contenders(steps, light):
    import gradviz
    from gradviz.tracing.adapters.torch import ddp as torch_ddp

    untraced, watch_off, watch_on = ddp_loop(steps), ddp_loop(steps), ddp_loop(steps)
    install = torch_ddp.install

    def traced_without_watcher():
        torch_ddp.install = lambda adapter: None
        try:
            with gradviz.trace(engine="torch", light=light):
                watch_off()
        finally:
            torch_ddp.install = install

    def traced():
        with gradviz.trace(engine="torch", light=light):
            watch_on()

    return {"untraced": untraced, "trace, DDP watcher off": traced_without_watcher, "trace (DDP watcher on)": traced}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="few rounds: a smoke run, not a measurement")
    parser.add_argument("--steps", type=int, default=20, help="training steps per timed loop (default 20)")
    parser.add_argument("--cpu", action="store_true", help="time the calling thread's CPU time (steadier when shared)")
    parser.add_argument("--full", action="store_true", help="trace every iteration in full (default: light schedule)")
    args = parser.parse_args(argv)
    clock = time.thread_time if args.cpu else time.perf_counter
    rounds = 4 if args.quick else 21
    with common.matched_threads(1) as note:
        import torch
        import torch.distributed as dist

        torch.set_num_threads(1)
        print(note + "; torch intra-op set to 1")
        print(common.machine_info())
        print()
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        try:
            samples = common.run_rounds(contenders(args.steps, not args.full), rounds=rounds, warmup=2, clock=clock)
        finally:
            dist.destroy_process_group()
    base = common.median(samples["untraced"]) / args.steps
    off = common.median(samples["trace, DDP watcher off"]) / args.steps
    rows = []
    for name, s in samples.items():
        value = common.median(s) / args.steps
        rows.append([name, common.format_time(value), f"±{common.spread(s) * 50:.0f}%",
                     common.ratio_text(value, base), common.ratio_text(value, off)])
    print(common.table(f"DDP MLP step, one gloo rank, loops of {args.steps} steps, {rounds} rounds, "
                       f"{'full' if args.full else 'light'} schedule: median "
                       f"{'CPU ' if args.cpu else ''}time per step", rows,
                       ["contender", "per step", "iqr/2", "vs untraced", "vs watcher off"]))


if __name__ == "__main__":
    main()
