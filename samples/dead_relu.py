"""A small classifier whose hidden layer starts with a large negative bias (`nn.init.constant_(bias, -4.0)`, a
"safe" initialisation copied from a sparse-activation recipe): almost every pre-activation is negative for every
example, the ReLU outputs zero, no gradient flows back through those units, and nothing ever moves them out.
The network learns little more than the classes' frequencies: test accuracy 0.52, against 0.89 for the fixed twin
(`dead_relu_fixed.py`, PyTorch's default initialisation). Nothing raises; the loss falls a little.

`gradviz run` on real PyTorch reports `dead-relu` (info) at the line calling the model, naming the ReLU
module and the Linear layer that feeds it.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

points = torch.randn(1200, 10)
labels = ((points[:, :5].sum(1) > 0).long() + (points[:, 5:].sum(1) > 0).long())
model = nn.Sequential(nn.Linear(10, 64), nn.ReLU(), nn.Linear(64, 3))
nn.init.constant_(model[0].bias, -4.0)  # the hidden units start far below zero
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
