"""The fixed twin of `clip_order.py`: `clip_grad_norm_` between `loss.backward()` and `optimizer.step()`, so
every step is clipped. Same data, same steps.

`gradviz run` reports nothing (clean).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

inputs = torch.randn(640, 4)
targets = inputs.sum(dim=1, keepdim=True) + 0.1 * torch.randn(640, 1)
targets[torch.randperm(640)[:6]] += 200.0  # a few corrupted labels: gradient spikes

model = nn.Sequential(nn.Linear(4, 32), nn.Tanh(), nn.Linear(32, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)

for epoch in range(6):
    order = torch.randperm(640)
    for start in range(0, 640, 32):
        batch = order[start:start + 32]
        optimizer.zero_grad()
        loss = F.mse_loss(model(inputs[batch]), targets[batch])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        optimizer.step()

with torch.no_grad():
    clean = targets < 100
    print(f"final loss on clean targets {F.mse_loss(model(inputs)[clean], targets[clean]).item():.2f}")
