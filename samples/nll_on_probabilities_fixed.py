"""The fixed twin of `nll_on_probabilities.py`: `F.nll_loss` is given `F.log_softmax(...)`, log-probabilities.
Same data, same steps.

`gradviz run` reports nothing (clean).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

prototypes = torch.randn(10, 64)
labels = torch.randint(0, 10, (1000,))
images = prototypes[labels] + 3.0 * torch.randn(1000, 64)
train_x, train_y, test_x, test_y = images[:800], labels[:800], images[800:], labels[800:]

model = nn.Sequential(nn.Linear(64, 48), nn.Tanh(), nn.Linear(48, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

for epoch in range(3):
    order = torch.randperm(800)
    for start in range(0, 800, 50):
        batch = order[start:start + 50]
        optimizer.zero_grad()
        log_probabilities = F.log_softmax(model(train_x[batch]), dim=1)
        loss = F.nll_loss(log_probabilities, train_y[batch])
        loss.backward()
        optimizer.step()

with torch.no_grad():
    accuracy = (model(test_x).argmax(dim=1) == test_y).float().mean().item()
print(f"last loss {loss.item():.3f}, test accuracy {accuracy:.2f}")
