"""Rank 1 is stopped from outside mid-run: after two steps it writes its pid to PIDFILE and waits there, until
another process sends it SIGTERM (`kill -TERM <pid>`, as a scheduler or a person would); rank 0 meanwhile waits
for it in the next all-reduce. `gradviz torchrun --standalone --nproc-per-node 2 ddp_rank_terminated.py PIDFILE`
then `kill -TERM $(cat PIDFILE)`: the report names rank 1, its line and who sent the signal first, and rank 0's
failure (gloo's error, or torchrun's own SIGTERM when it tears the job down) under it."""

import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
rank = dist.get_rank()
model = DDP(torch.nn.Linear(4, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for step in range(2):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
if rank == 1:
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.replace(sys.argv[1] + ".tmp", sys.argv[1])  # whole, for whoever reads it
    time.sleep(3600)
dist.all_reduce(torch.ones(1))
dist.destroy_process_group()
