"""The fixed twin of `scheduler_misuse.py`: `scheduler.step()` once per epoch, after the loop over batches, so
`StepLR(step_size=3, gamma=0.5)` halves the rate every three epochs as meant. Same data, same steps: test
accuracy 0.98 (0.78 with the schedule stepped per batch).

`gradviz run` reports nothing (clean).
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
