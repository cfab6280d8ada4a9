"""Rank 0 halves its first layer's gradient after DDP's all-reduce: the ranks' replicas drift apart and nothing
raises. `gradviz torchrun --standalone --nproc-per-node 2 ddp_grad_local_write.py` names the write, its rank and
its line (`ddp-grad-mismatch`)."""

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = DDP(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1)))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    opt.zero_grad()
    loss = model(torch.randn(16, 4) + rank).pow(2).mean()
    loss.backward()
    if rank == 0:
        model.module[0].weight.grad.mul_(0.5)
    opt.step()
dist.destroy_process_group()
