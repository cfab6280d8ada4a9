"""The seed question's first version: two single-layer models bridged by hand with the deprecated Variable API.

    y1 = model1(X)
    v = Variable(y1.data, requires_grad=training)         # Its all about this line!
    y2 = model2(v)
    ...
    loss.backward()
    y1.backward(v.grad)

It trains correctly. `Variable(y1.data, requires_grad=True)` cuts the graph after model1 and makes `v` a new leaf;
`loss.backward()` stops at `v` (so `v.grad` is filled), and `y1.backward(v.grad)` carries that gradient into
model1 by hand. `gradviz run` shows it as what it is, two graphs bridged by hand, and reports only:

    graph-cut (info)  at the `v = Variable(y1.data, ...)` line

seed_sequential_fix.py is the same training with one graph and one backward.
"""

import gradviz as torch
import gradviz.nn as nn
import gradviz.nn.functional as F
from gradviz.autograd import Variable

torch.manual_seed(0)


class Model1(nn.Module):
    """A single convolution, like the asker's model1 (its grad_fn was ThnnConv2DBackward)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3)

    def forward(self, x):
        return self.conv(x)


class Model2(nn.Module):
    """A single linear layer with log-probabilities out, for NLLLoss."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4 * 4 * 4, 3)

    def forward(self, x):
        return F.log_softmax(self.fc(x.flatten(1)), dim=1)


class Trainer:
    def __init__(self):
        self.model1 = Model1()
        self.model2 = Model2()
        params = list(self.model1.parameters()) + list(self.model2.parameters())
        self.optimizer = torch.optim.SGD(params, lr=0.1)

    def step(self):
        self.optimizer.step()

    def train_batch(self, X, y, training=True):
        model1, model2 = self.model1, self.model2
        self.optimizer.zero_grad()
        y1 = model1(X)
        v = Variable(y1.data, requires_grad=training)         # Its all about this line!
        y2 = model2(v)
        criterion = nn.NLLLoss()
        loss = criterion(y2, y)
        loss.backward()
        y1.backward(v.grad)
        self.step()
        return loss.item()


trainer = Trainer()
X = torch.randn(8, 1, 6, 6)
y = torch.randint(0, 3, (8,))
for _ in range(5):
    last = trainer.train_batch(X, y)
print(f"loss after 5 steps: {last:.4f}")
