"""The fixed twin of `softmax_wrong_dim.py`: `F.log_softmax(..., dim=1)`, over the classes. Same data, same
steps.

`gradviz run` reports nothing (clean).
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
        return F.log_softmax(self.fc2(x), dim=1)


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
