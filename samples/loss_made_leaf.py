"""A classifier whose training step reuses the evaluation helper `predict()`, which runs the model under
`torch.no_grad()`: the loss has no graph, PyTorch raises "element 0 of tensors does not require grad", and the
script "fixes" it with `loss.requires_grad = True`. Backward now runs and writes a gradient into the loss alone;
no parameter ever gets one, the optimizer's steps do nothing, and the untrained model's test accuracy is 0.07,
against 1.00 for the fixed twin `loss_made_leaf_fixed.py`. Nothing raises.

`gradviz run` reports `loss-made-leaf` (warning) at the `loss.backward()` line, naming `loss`, and
`unused-parameter` (warning) at the model's line: no op that backward could reach used its parameters.
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
        loss = F.cross_entropy(predict(model, train_x[start:start + 50]), train_y[start:start + 50])
        loss.requires_grad = True
        loss.backward()
        optimizer.step()

accuracy = (predict(model, test_x).argmax(dim=1) == test_y).float().mean().item()
print(f"last loss {loss.item():.3f}, test accuracy {accuracy:.2f}")
