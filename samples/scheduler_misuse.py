"""A classifier trained for 12 epochs with SGD and a `StepLR(step_size=3, gamma=0.5)` meant to halve the
learning rate every three epochs, but `scheduler.step()` sits inside the batch loop: the schedule counts
batches, and the rate halves every three batches. After 30 of the 192 steps it is under 1/1000 of its first
value and the rest of the run barely moves the weights: test accuracy 0.78, against 0.98 for the fixed twin
(`scheduler_misuse_fixed.py`, which steps the schedule once per epoch). Nothing raises.

`gradviz run` reports `scheduler-misuse` (warning) at the `scheduler.step()` line, with the scheduler's
construction as related.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

centres = torch.randn(4, 10) * 1.5
labels = torch.randint(0, 4, (1200,))
points = centres[labels] + torch.randn(1200, 10)
train = DataLoader(TensorDataset(points[:1024], labels[:1024]), batch_size=64, shuffle=True)
test_x, test_y = points[1024:], labels[1024:]

model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.5)

for epoch in range(12):
    for x, y in train:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        scheduler.step()

with torch.no_grad():
    print(f"test accuracy {(model(test_x).argmax(1) == test_y).float().mean():.2f}")
