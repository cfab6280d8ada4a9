"""A classifier written like PyTorch's MNIST example (`forward` returns `F.log_softmax(...)`, trained with
`F.nll_loss`), with `dim=0`: the log-softmax normalises each class's scores across the examples of the batch,
not each example's across the classes: a prediction depends on the rest of its batch, and the loss (2.53 at the
end, against 0.04 for the fixed twin `softmax_wrong_dim_fixed.py`, `dim=1`) measures something else. Test
accuracy suffers less here (0.76 against 0.79: the arg-max over the classes partly survives). Nothing raises.

`gradviz run` reports `softmax-wrong-dim` (warning) at the `F.log_softmax` line, with the loss's line as
related, and a hint that rewrites it with `dim=1`.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

prototypes = torch.randn(5, 20)
labels = torch.multinomial(torch.tensor([0.5, 0.2, 0.15, 0.1, 0.05]), 1000, replacement=True)
inputs = prototypes[labels] + 2.0 * torch.randn(1000, 20)
train_x, train_y, test_x, test_y = inputs[:800], labels[:800], inputs[800:], labels[800:]


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(20, 64)
        self.fc2 = nn.Linear(64, 5)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        return F.log_softmax(self.fc2(x), dim=0)


model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

for epoch in range(5):
    order = torch.randperm(800)
    for start in range(0, 800, 40):
        batch = order[start:start + 40]
        optimizer.zero_grad()
        loss = F.nll_loss(model(train_x[batch]), train_y[batch])
        loss.backward()
        optimizer.step()

with torch.no_grad():
    accuracy = (model(test_x).argmax(dim=1) == test_y).float().mean().item()
print(f"last loss {loss.item():.3f}, test accuracy {accuracy:.2f}")
