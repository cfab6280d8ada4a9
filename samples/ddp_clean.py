"""A correct DDP training loop: every rank runs the same model, gradient accumulation under `no_sync()`.

Two micro-steps per optimizer step, the first under `model.no_sync()`, so one all-reduce per step. No DDP
diagnostic: every parameter gets a gradient on every rank, the ranks build the same graphs, and their
gradients agree at every step.

Run on 2 CPU ranks: `torchrun --nproc-per-node 2 samples/ddp_clean.py` (or plain `python`).
"""

import contextlib
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel

MICRO_STEPS = 2


def train(rank, world_size, steps=3):
    torch.manual_seed(0)
    model = DistributedDataParallel(nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(steps):
        opt.zero_grad()
        for micro in range(MICRO_STEPS):
            x = torch.randn(8, 4) + rank
            last = micro == MICRO_STEPS - 1
            with contextlib.nullcontext() if last else model.no_sync():
                loss = model(x).pow(2).mean() / MICRO_STEPS
                loss.backward()
        opt.step()


def _rank(rank, world_size):
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29515")
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    try:
        train(rank, world_size)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    if "RANK" in os.environ:  # started by torchrun
        _rank(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]))
    else:
        mp.spawn(_rank, args=(2,), nprocs=2)
