"""The seed's accepted fix: chain the two models with `nn.Sequential` and call backward once.

    model = torch.nn.Sequential(Model1(), Model2())

One graph runs from the loss back through model2 into model1, so `loss.backward()` alone fills every parameter's
gradient: no `Variable`, no second backward, no retained graph. `gradviz run` reports nothing (clean).
"""

import gradviz as torch
import gradviz.nn as nn
import gradviz.nn.functional as F

torch.manual_seed(0)


class Model1(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3)

    def forward(self, x):
        return self.conv(x)


class Model2(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4 * 4 * 4, 3)

    def forward(self, x):
        return F.log_softmax(self.fc(x.flatten(1)), dim=1)


model = torch.nn.Sequential(Model1(), Model2())
criterion = nn.NLLLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

X = torch.randn(8, 1, 6, 6)
y = torch.randint(0, 3, (8,))
for _ in range(20):
    optimizer.zero_grad()
    loss = criterion(model(X), y)
    loss.backward()
    optimizer.step()
print(f"loss after 20 steps: {loss.item():.4f}")
