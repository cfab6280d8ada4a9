"""A three-class classifier whose model returns probabilities, trained with `nn.CrossEntropyLoss`: the model's
`forward` ends in `F.softmax(...)`, and the loss applies log_softmax again. Nothing raises and the loss falls a
little, but the gradients are squeezed: test accuracy 0.74, against 0.90 for the fixed twin
(`softmax_before_cross_entropy_fixed.py`, which returns the logits and takes softmax only to predict).

`gradviz run` reports `softmax-before-cross-entropy` (warning) at the `F.softmax` line, with the loss's line
as related, and a hint that rewrites it as `return self.out(h)`.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

centres = torch.tensor([[2.0, 0.0], [-1.0, 1.7], [-1.0, -1.7]])
labels = torch.randint(0, 3, (600,))
points = centres[labels] + 0.9 * torch.randn(600, 2)
features = torch.cat([points, points.pow(2), torch.randn(600, 4)], dim=1)  # 8 features, 4 of them noise
train = DataLoader(TensorDataset(features[:480], labels[:480]), batch_size=32, shuffle=True)
test_x, test_y = features[480:], labels[480:]


class Classifier(nn.Module):
    def __init__(self, n_in, n_classes):
        super().__init__()
        self.hidden = nn.Linear(n_in, 32)
        self.out = nn.Linear(32, n_classes)

    def forward(self, x):
        h = torch.relu(self.hidden(x))
        return F.softmax(self.out(h), dim=1)  # probabilities: CrossEntropyLoss wants the logits


model = Classifier(8, 3)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.03)

for epoch in range(4):
    for x, y in train:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()

with torch.no_grad():
    accuracy = (model(test_x).argmax(dim=1) == test_y).float().mean().item()
print(f"last loss {loss.item():.3f}, test accuracy {accuracy:.2f}")
