"""The fixed twin of `loss_diverging.py`: the same network and data with SGD at `lr=0.05`, ten times smaller:
the loss falls and stays finite (final test loss 0.5426; nan at `lr=0.5`).

`gradviz run` reports nothing (clean).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

inputs = torch.randn(1024, 6)
targets = inputs @ torch.randn(6, 1) + torch.sin(3 * inputs[:, :1])
test_x, test_y = inputs[896:], targets[896:]

model = nn.Sequential(nn.Linear(6, 64), nn.ReLU(), nn.Linear(64, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)

for epoch in range(5):
    order = torch.randperm(896)
    for start in range(0, 896, 32):
        batch = order[start:start + 32]
        optimizer.zero_grad()
        loss = F.mse_loss(model(inputs[batch]), targets[batch])
        loss.backward()
        optimizer.step()

with torch.no_grad():
    print(f"test loss {F.mse_loss(model(test_x), test_y).item():.4f}")
