"""A regression loop with its three calls in the wrong order: `loss.backward()`, then `optimizer.zero_grad()`,
then `optimizer.step()`. The gradients are cleared (set to None) just before the step reads them, so Adam skips
every parameter: the model never changes and the loss stays where it started (7.21, against 0.05 for the fixed
twin `zero_grad_before_step_fixed.py`, which clears them before the forward). Nothing raises.

`gradviz run` reports `zero-grad-before-step` (warning) at the `optimizer.zero_grad()` line, with the step as
related.
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
        loss = F.mse_loss(model(x), y)
        loss.backward()
        optimizer.zero_grad()
        optimizer.step()

with torch.no_grad():
    print(f"final loss {F.mse_loss(model(inputs), targets).item():.3f}")
