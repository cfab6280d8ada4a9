"""DDP where rank 1 gates the model's output and rank 0 does not: the ranks build different graphs each step.

Nothing raises (every rank still uses every parameter), but the ranks train different functions, and one more
layer behind that branch would hang the job. `ddp-divergent-graph` points at the `torch.sigmoid` line, the first
op only rank 1 runs.

Run on 2 CPU ranks: `torchrun --nproc-per-node 2 samples/ddp_divergent_graph.py` (or plain `python`).
"""

import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel


def train(rank, world_size, steps=3):
    torch.manual_seed(0)
    model = DistributedDataParallel(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        x = torch.randn(16, 4) + rank
        opt.zero_grad()
        out = model(x)
        if rank == 1:
            out = out * torch.sigmoid(out)
        loss = out.pow(2).mean()
        loss.backward()
        opt.step()


def _rank(rank, world_size):
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29512")
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
