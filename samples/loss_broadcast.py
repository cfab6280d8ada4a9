"""A regression with a hand-written mean squared error: the model's output has shape (N, 1) and the targets
shape (N,), so `pred - y` broadcasts to (N, N) and the loss compares every prediction with every target. It is
minimised by predicting the targets' mean for every input: the model learns only the mean. Nothing raises.
Test RMSE 1.67 (the targets' spread is 1.73), against 0.17 for the fixed twin (`loss_broadcast_fixed.py`,
which squeezes the prediction).

`gradviz run` reports `loss-broadcast` (warning) at the loss's line, naming `pred` (N, 1) and `y` (N,).
"""

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

features = torch.rand(1000, 3) * 4 - 2
values = features[:, 0] ** 2 - features[:, 1] + torch.sin(2 * features[:, 2])  # shape (N,)
train = DataLoader(TensorDataset(features[:800], values[:800]), batch_size=50, shuffle=True)
test_x, test_y = features[800:], values[800:]

model = nn.Sequential(nn.Linear(3, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)

for epoch in range(15):
    for x, y in train:
        optimizer.zero_grad()
        pred = model(x)
        loss = ((pred - y) ** 2).mean()
        loss.backward()
        optimizer.step()

with torch.no_grad():
    rmse = (model(test_x).squeeze(1) - test_y).pow(2).mean().sqrt().item()
print(f"test RMSE {rmse:.2f}, spread of the targets {test_y.std().item():.2f}")
