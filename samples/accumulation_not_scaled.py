"""A regression trained with gradient accumulation over 8 batches of 16 (a batch of 128 that would not fit),
with SGD at the learning rate tuned for one batch: each batch's mean loss goes to `loss.backward()` as is, so
every step applies the sum of 8 mean gradients, 8 times too large a step. Training diverges: the loss is NaN
within its one epoch and the test loss is nan, against 0.1443 for the fixed twin
(`accumulation_not_scaled_fixed.py`, which writes `(loss / accumulation).backward()`). Nothing raises.

`gradviz run` reports `accumulation-not-scaled` (info) at the `loss.backward()` line, with the step as related,
`loss-diverging` (warning) at the optimizer's line (the symptom: its learning rate is now 8 times too large),
and `nan-inf` (warning) at the loss's line, where the divergence ends.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

inputs = torch.randn(2048, 8)
targets = torch.tanh(inputs @ torch.randn(8, 1)) + 0.05 * torch.randn(2048, 1)
test_x, test_y = inputs[1792:], targets[1792:]

model = nn.Sequential(nn.Linear(8, 64), nn.Tanh(), nn.Linear(64, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.3)
accumulation = 8

for epoch in range(1):
    order = torch.randperm(1792)
    for i, start in enumerate(range(0, 1792, 16)):
        batch = order[start:start + 16]
        loss = F.mse_loss(model(inputs[batch]), targets[batch])
        loss.backward()
        if (i + 1) % accumulation == 0:
            optimizer.step()
            optimizer.zero_grad()

with torch.no_grad():
    print(f"test loss {F.mse_loss(model(test_x), test_y).item():.4f}")
