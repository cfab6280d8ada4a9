"""A regression loop that builds its Adam optimizer inside the loop, once per batch: every optimizer starts with
empty moment estimates, so every step is Adam's first step, which moves each weight by about the learning rate
whatever its gradient. Training is noisy and stalls: final loss 0.124, against 0.012 for the fixed twin
(`optimizer_recreated_fixed.py`, which builds it once before the loop). Nothing raises.

`gradviz run` reports `optimizer-recreated` (warning) at the optimizer's line.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

inputs = torch.rand(800, 2) * 6 - 3
targets = torch.sin(inputs[:, :1]) * torch.cos(inputs[:, 1:])

model = nn.Sequential(nn.Linear(2, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 1))

for epoch in range(10):
    order = torch.randperm(800)
    for start in range(0, 800, 100):
        batch = order[start:start + 100]
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
        optimizer.zero_grad()
        loss = F.mse_loss(model(inputs[batch]), targets[batch])
        loss.backward()
        optimizer.step()

with torch.no_grad():
    print(f"final loss {F.mse_loss(model(inputs), targets).item():.3f}")
