"""The fixed twin of `accumulation_not_scaled.py`: each of the 8 accumulated losses divided by 8 before
`backward()`, so a step applies the gradient of the mean over the 8 batches. Same data, same steps: final test
loss 0.1443 after one epoch (nan without the division).

`gradviz run` reports nothing (clean).
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
        (loss / accumulation).backward()
        if (i + 1) % accumulation == 0:
            optimizer.step()
            optimizer.zero_grad()

with torch.no_grad():
    print(f"test loss {F.mse_loss(model(test_x), test_y).item():.4f}")
