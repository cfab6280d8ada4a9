"""The fixed twin of `dead_relu.py`: the hidden layer keeps PyTorch's default initialisation, about half of its
units are active on each batch and the whole network trains.

`gradviz run` reports nothing (clean).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

points = torch.randn(1200, 10)
labels = ((points[:, :5].sum(1) > 0).long() + (points[:, 5:].sum(1) > 0).long())
model = nn.Sequential(nn.Linear(10, 64), nn.ReLU(), nn.Linear(64, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.2)

for step in range(150):
    batch = torch.randint(0, 1000, (64,))
    optimizer.zero_grad()
    loss = F.cross_entropy(model(points[batch]), labels[batch])
    loss.backward()
    optimizer.step()

with torch.no_grad():
    accuracy = (model(points[1000:]).argmax(1) == labels[1000:]).float().mean().item()
print(f"test accuracy {accuracy:.2f}")
