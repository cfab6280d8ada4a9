"""The fixed twin of `loss_made_leaf.py`: the training step calls the model with grad on, and there is no
`requires_grad` line; `predict()` is kept for evaluation. Same data, same steps.

`gradviz run` reports nothing (clean).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

centres = torch.randn(3, 8) * 2
labels = torch.randint(0, 3, (600,))
inputs = centres[labels] + torch.randn(600, 8)
train_x, train_y, test_x, test_y = inputs[:500], labels[:500], inputs[500:], labels[500:]

model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)


def predict(model, x):
    with torch.no_grad():
        return model(x)


for epoch in range(5):
    for start in range(0, 500, 50):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(train_x[start:start + 50]), train_y[start:start + 50])
        loss.backward()
        optimizer.step()

accuracy = (predict(model, test_x).argmax(dim=1) == test_y).float().mean().item()
print(f"last loss {loss.item():.3f}, test accuracy {accuracy:.2f}")
