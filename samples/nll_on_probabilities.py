"""A digit-like classifier (ten classes of noisy prototypes) trained with `F.nll_loss` on `F.softmax(...)`:
probabilities where the loss wants log-probabilities. The loss is minus a probability, between -1 and 0;
confidently wrong predictions are barely penalised. Nothing raises and the loss goes down: test accuracy 0.61,
against 0.76 for the fixed twin (`nll_on_probabilities_fixed.py`), which takes `F.log_softmax`.

`gradviz run` reports `nll-on-probabilities` (warning) at the `F.softmax` line, with the `nll_loss` line as
related, and a hint that rewrites it with `log_softmax`.
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
        probabilities = F.softmax(model(train_x[batch]), dim=1)
        loss = F.nll_loss(probabilities, train_y[batch])
        loss.backward()
        optimizer.step()

with torch.no_grad():
    accuracy = (model(test_x).argmax(dim=1) == test_y).float().mean().item()
print(f"last loss {loss.item():.3f}, test accuracy {accuracy:.2f}")
