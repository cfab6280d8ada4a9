import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

torch.manual_seed(0)
block = nn.Sequential(nn.Linear(64, 256), nn.Tanh(), nn.Linear(256, 256), nn.Tanh(), nn.Linear(256, 64))
head = nn.Linear(64, 1)
opt = torch.optim.SGD(list(block.parameters()) + list(head.parameters()), lr=0.01)
x = torch.randn(32, 64)
for _ in range(10):
    opt.zero_grad()
    h = checkpoint(block, x, use_reentrant=False)
    loss = head(h).pow(2).mean()
    loss.backward()
    opt.step()
