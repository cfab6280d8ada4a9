"""A clean DDP training of a small MLP on gloo (CPU): `gradviz torchrun --standalone --nproc-per-node 2 ddp_mlp.py`
or `gradviz run --nproc-per-node 2 ddp_mlp.py`. Every rank builds the same graph; no diagnostics."""

import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 4
dist.init_process_group("gloo")
torch.manual_seed(dist.get_rank())
model = DDP(torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for step in range(steps):
    x = torch.randn(16, 8)
    loss = (model(x) - x.sum(1, keepdim=True)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
dist.destroy_process_group()
