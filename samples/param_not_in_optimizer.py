"""A residual MLP whose blocks are kept in a plain Python list: `nn.Module` does not register them, so
`model.parameters()` leaves them out and the optimizer never updates them, though `forward` uses them and
backward computes their gradients. The blocks stay at their random initialisation; nothing raises. Test
accuracy 0.73, against 0.82 for the fixed twin (`param_not_in_optimizer_fixed.py`, `nn.ModuleList`).

`gradviz run` reports `param-not-in-optimizer` (warning) at the `self.blocks = [...]` line, with the
optimizer's line as related, and a hint that rewrites it with `nn.ModuleList`.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

inputs = torch.randn(1200, 12)
labels = ((inputs[:, :6].sin().sum(dim=1) * inputs[:, 6:].cos().sum(dim=1)) > 0).long() + \
    (inputs[:, 0] * inputs[:, 1] > 0.5).long()
train_x, train_y, test_x, test_y = inputs[:1000], labels[:1000], inputs[1000:], labels[1000:]


class ResidualMLP(nn.Module):
    def __init__(self, width, depth, classes):
        super().__init__()
        self.embed = nn.Linear(12, width)
        self.blocks = [nn.Linear(width, width) for _ in range(depth)]
        self.head = nn.Linear(width, classes)

    def forward(self, x):
        h = self.embed(x)
        for block in self.blocks:
            h = h + torch.relu(block(h))
        return self.head(h)


model = ResidualMLP(32, 3, 3)
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)

for epoch in range(12):
    for start in range(0, 1000, 100):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(train_x[start:start + 100]), train_y[start:start + 100])
        loss.backward()
        optimizer.step()

with torch.no_grad():
    accuracy = (model(test_x).argmax(dim=1) == test_y).float().mean().item()
print(f"last loss {loss.item():.3f}, test accuracy {accuracy:.2f}")
