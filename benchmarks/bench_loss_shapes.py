"""What the light watch's look near each root costs a light backward (``adapters/torch/loss_shapes.sightings``).

    python benchmarks/bench_loss_shapes.py [--turns T] [--calls C]

Graphs: an MLP's cross-entropy loss (the usual step), a hand-written MSE, and a 12-layer MLP (the look stops at
its depth and node limits). Per graph: the CPU time of one ``sightings(fn)`` (median over T turns of C calls),
beside the CPU time of that graph's ``loss.backward()`` (the work the look is added to), and the Python calls one
look makes (cProfile, deterministic).
"""

import argparse
import cProfile
import pstats
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()

    import torch
    import torch.nn.functional as F

    from gradviz.tracing.adapters.torch.loss_shapes import sightings

    torch.manual_seed(0)
    torch.set_num_threads(1)  # (process CPU time: no idle pool threads spinning into it)
    x, y, t = torch.randn(64, 32), torch.randint(0, 10, (64,)), torch.randn(64, 10)
    small = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    deep = torch.nn.Sequential(*[m for _ in range(12) for m in (torch.nn.Linear(32, 32), torch.nn.ReLU())],
                               torch.nn.Linear(32, 10))
    losses = {"mlp cross-entropy": lambda: F.cross_entropy(small(x), y),
              "mlp hand-written mse": lambda: ((small(x) - t) ** 2).mean(),
              "12-layer mlp": lambda: F.cross_entropy(deep(x), y)}
    print(f"one look near the root, against the backward it precedes ({args.turns} turns, CPU medians)")
    for name, make in losses.items():
        loss = make()
        fn = loss.grad_fn
        assert sightings(fn) == []
        looks = []
        for _ in range(args.turns):
            start = time.process_time()
            for _ in range(args.calls):
                sightings(fn)
            looks.append((time.process_time() - start) / args.calls)
        backwards = []
        for _ in range(args.turns):
            graphs = [make() for _ in range(50)]
            start = time.process_time()
            for g in graphs:
                g.backward()
            backwards.append((time.process_time() - start) / 50)
        profile = cProfile.Profile()
        profile.enable()
        sightings(fn)
        profile.disable()
        look, backward = statistics.median(looks), statistics.median(backwards)
        print(f"  {name:<22} look {look * 1e6:6.1f} us   backward {backward * 1e6:7.1f} us   "
              f"look/backward {look / backward:.2f}   {pstats.Stats(profile).total_calls} Python calls")


if __name__ == "__main__":
    main()
