"""A correct gradient-accumulation loop: 4 backward calls per optimizer step, 60 steps."""
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(16, 4), torch.randn(16, 1)
for _step in range(60):
    opt.zero_grad()
    for _ in range(4):
        loss = ((model(x) - y) ** 2).mean() / 4
        loss.backward()
    opt.step()
