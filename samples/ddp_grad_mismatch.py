"""DDP wrapping the backbone only: the head's gradients are never all-reduced and differ across ranks.

Nothing raises; the ranks' copies of the head drift apart from the first step. `ddp-grad-mismatch` names
`head.weight` and `head.bias`, every rank, and the `head(...)` line.

Run on 2 CPU ranks: `torchrun --nproc-per-node 2 samples/ddp_grad_mismatch.py` (or plain `python`).
"""

import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel


def train(rank, world_size, steps=3):
    torch.manual_seed(0)
    backbone = DistributedDataParallel(nn.Sequential(nn.Linear(4, 8), nn.ReLU()))
    head = nn.Linear(8, 1)
    opt = torch.optim.SGD([*backbone.parameters(), *head.parameters()], lr=0.1)
    for _ in range(steps):
        x = torch.randn(16, 4) + rank
        opt.zero_grad()
        loss = head(backbone(x)).pow(2).mean()
        loss.backward()
        opt.step()


def _rank(rank, world_size):
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29514")
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
