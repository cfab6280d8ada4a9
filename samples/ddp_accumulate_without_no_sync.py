"""DDP with gradient accumulation over 4 micro-steps and no `no_sync()`: every backward all-reduces.

The result is right, but each optimizer step costs 4 all-reduces where 1 is needed.
`ddp-accumulate-without-no-sync` points at the `model(x)` line of the micro-steps, with 4 backward passes and
4 all-reduces per step.

Run on 2 CPU ranks: `torchrun --nproc-per-node 2 samples/ddp_accumulate_without_no_sync.py` (or plain `python`).
"""

import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel

MICRO_STEPS = 4


def train(rank, world_size, steps=2):
    torch.manual_seed(0)
    model = DistributedDataParallel(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        opt.zero_grad()
        for _ in range(MICRO_STEPS):
            x = torch.randn(8, 4) + rank
            loss = model(x).pow(2).mean() / MICRO_STEPS
            loss.backward()
        opt.step()


def _rank(rank, world_size):
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29513")
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
