"""Mistake: `total_loss += loss` sums the loss tensors themselves, so every iteration's graph stays reachable
from `total_loss` and memory grows with each batch. The printed numbers are right; the fix is
`total_loss += loss.item()`."""
import torch
import torch.nn as nn

torch.manual_seed(13)
model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
batches = [(torch.randn(8, 6), torch.randn(8, 1)) for _ in range(12)]

total_loss = 0
for inputs, targets in batches:
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(inputs), targets)
    loss.backward()
    optimizer.step()
    total_loss += loss
print(f"mean loss {total_loss.item() / len(batches):.5f}")
print("total_loss requires grad:", total_loss.requires_grad)
