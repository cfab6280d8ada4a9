"""The fixed twin of `zero_grad_before_step.py`: `optimizer.zero_grad()` at the start of each step, before the
forward and `backward()`. Same data, same steps.

`gradviz run` reports nothing (clean).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

inputs = torch.randn(512, 5)
targets = inputs @ torch.tensor([[1.5], [-2.0], [0.5], [0.0], [1.0]]) + 0.3 * inputs[:, :1] ** 2
loader = DataLoader(TensorDataset(inputs, targets), batch_size=64, shuffle=True)

model = nn.Sequential(nn.Linear(5, 32), nn.ReLU(), nn.Linear(32, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

for epoch in range(8):
    for x, y in loader:
        optimizer.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()

with torch.no_grad():
    print(f"final loss {F.mse_loss(model(inputs), targets).item():.3f}")
