"""Rank 1 is killed outright in its second step (SIGKILL, as the OOM killer does): it leaves no document, and
rank 0 fails in its next all-reduce. `gradviz torchrun --standalone --nproc-per-node 2 ddp_rank_killed.py` names
rank 1 first and rank 0's connection error as what followed."""

import os
import signal

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
rank = dist.get_rank()
model = DDP(torch.nn.Linear(4, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for step in range(3):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if rank == 1 and step == 1:
        os.kill(os.getpid(), signal.SIGKILL)
dist.destroy_process_group()
