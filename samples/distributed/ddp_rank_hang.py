"""Rank 1 never reaches the last all-reduce, so rank 0 waits in it for ever:
`gradviz torchrun --timeout 20 --standalone --nproc-per-node 2 ddp_rank_hang.py` stops the job and says where
each rank was."""

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
    time.sleep(3600)
dist.all_reduce(torch.ones(1))
dist.destroy_process_group()
