"""The fixed twin of `eval_mode_forgotten.py`: `model.eval()` before each validation and `model.train()` at the
start of every epoch. Same data, same steps.

`gradviz run` reports nothing (clean).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

centres = 2.0 * torch.randn(4, 16)
labels = torch.randint(0, 4, (1200,))
inputs = 5.0 + 3.0 * (centres[labels] + 2.5 * torch.randn(1200, 16))  # unnormalised: batch norm matters
train_x, train_y = inputs[:800], labels[:800]
val_x, val_y = inputs[800:1000], labels[800:1000]
test_x, test_y = inputs[1000:], labels[1000:]

model = nn.Sequential(nn.Linear(16, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Dropout(0.5),
                      nn.Linear(64, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Dropout(0.5), nn.Linear(64, 4))
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)

for epoch in range(4):
    model.train()
    order = torch.randperm(800)
    for start in range(0, 800, 80):
        batch = order[start:start + 80]
        optimizer.zero_grad()
        loss = F.cross_entropy(model(train_x[batch]), train_y[batch])
        loss.backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        val_accuracy = (model(val_x).argmax(dim=1) == val_y).float().mean().item()

model.eval()
with torch.no_grad():
    accuracy = (model(test_x).argmax(dim=1) == test_y).float().mean().item()
print(f"last loss {loss.item():.3f}, validation {val_accuracy:.2f}, test accuracy {accuracy:.2f}")
