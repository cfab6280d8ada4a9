"""The fixed twin of `optimizer_recreated.py`: Adam is built once, before the loop, and keeps its moment
estimates. Same data, same steps.

`gradviz run` reports nothing (clean).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

inputs = torch.rand(800, 2) * 6 - 3
targets = torch.sin(inputs[:, :1]) * torch.cos(inputs[:, 1:])

model = nn.Sequential(nn.Linear(2, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

for epoch in range(10):
    order = torch.randperm(800)
    for start in range(0, 800, 100):
        batch = order[start:start + 100]
        optimizer.zero_grad()
        loss = F.mse_loss(model(inputs[batch]), targets[batch])
        loss.backward()
        optimizer.step()

with torch.no_grad():
    print(f"final loss {F.mse_loss(model(inputs), targets).item():.3f}")
