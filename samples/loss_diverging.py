"""A small regression network trained with SGD at `lr=0.5`, too large for it: the loss falls for a few steps,
then each update overshoots further, the loss climbs by orders of magnitude and becomes NaN; the final test
loss is nan, against 0.5426 for the fixed twin (`loss_diverging_fixed.py`, `lr=0.05`). Nothing raises before
the NaN, and the NaN itself shows up far from the cause.

`gradviz run` reports `loss-diverging` (warning) at the optimizer's line with its learning rate, the
`loss.backward()` line related, and `nan-inf` (warning) at the loss's line where the NaN appears.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

inputs = torch.randn(1024, 6)
targets = inputs @ torch.randn(6, 1) + torch.sin(3 * inputs[:, :1])
test_x, test_y = inputs[896:], targets[896:]

model = nn.Sequential(nn.Linear(6, 64), nn.ReLU(), nn.Linear(64, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.5)

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
