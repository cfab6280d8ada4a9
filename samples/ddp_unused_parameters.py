"""DDP with a layer skipped on rank 1 only: its parameters get no gradient there, and DDP waits for them.

Rank 1 raises PyTorch's "Expected to have finished reduction in the prior iteration" at its second forward, and
rank 0, whose all-reduce never gets a partner, fails when rank 1 goes. `ddp-unused-parameters` names
`model.module.hidden.weight` and `.bias`, rank 1, and the `self.hidden(h)` line the branch skipped.

Run on 2 CPU ranks: `torchrun --nproc-per-node 2 samples/ddp_unused_parameters.py` (or plain `python`, which
starts the two ranks itself).
"""

import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(4, 8)
        self.hidden = nn.Linear(8, 8)
        self.out = nn.Linear(8, 1)

    def forward(self, x, deep):
        h = torch.relu(self.inp(x))
        if deep:
            h = torch.relu(self.hidden(h))
        return self.out(h)


def train(rank, world_size, steps=3):
    torch.manual_seed(0)
    model = DistributedDataParallel(Net())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        x = torch.randn(16, 4) + rank
        opt.zero_grad()
        loss = model(x, deep=rank != 1).pow(2).mean()
        loss.backward()
        opt.step()


def _rank(rank, world_size):
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29511")
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
