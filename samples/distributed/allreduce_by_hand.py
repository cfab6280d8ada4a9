"""Data parallel by hand, without DDP: the loop all-reduces the first layer's gradients and forgets the last
layer's, which stay each rank's own. `gradviz torchrun --standalone --nproc-per-node 2 allreduce_by_hand.py` names
the parameters never reduced at the loop's line (`ddp-grad-mismatch`)."""

import torch
import torch.distributed as dist
import torch.nn as nn

dist.init_process_group("gloo")
rank, world_size = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    opt.zero_grad()
    loss = model(torch.randn(16, 4) + rank).pow(2).mean()
    loss.backward()
    for p in model[0].parameters():
        dist.all_reduce(p.grad)
        p.grad /= world_size
    opt.step()
dist.destroy_process_group()
