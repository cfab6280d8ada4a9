"""Rank 1 raises in its second step; torchrun stops rank 0, which still writes its document:
`gradviz torchrun --standalone --nproc-per-node 2 ddp_rank_crash.py` says which rank stopped where."""

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
        raise RuntimeError("rank 1 gives up at step 1")
dist.destroy_process_group()
