"""A two-rank DDP job (gloo, CPU) where rank 1 reads a non-leaf's .grad once, at step 41 (an unsampled step)."""

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
torch.manual_seed(dist.get_rank())
model = DDP(torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(60):
    x = torch.randn(16, 8)
    loss = (model(x) - x.sum(1, keepdim=True)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    if step == 41 and dist.get_rank() == 1:
        print("loss grad:", loss.grad)  # MARK
    opt.step()
dist.destroy_process_group()
