"""The seed question's second version: the models chained, then `y1.backward(y1.grad)` — which breaks.

    y1 = model1(X)
    y2 = model2(y1)
    ...
    loss.backward()
    y1.backward(y1.grad) # it breaks here
    >>> RuntimeError: grad can be implicitly created only for scalar outputs

`y1` is not a leaf, so backward keeps no gradient for it: `y1.grad` is None, and passing None to backward on the
non-scalar `y1` is the same as passing nothing. The script stops there (exit status 1). `gradviz run` reports:

    none-grad (warning)            at the `y1.backward(y1.grad)` line: `y1.grad` is None, y1 is not a leaf
    nonscalar-backward (error)     at the same line, linked to the none-grad read that produced the None

The fix (seed_sequential_fix.py): `loss.backward()` alone already reaches model1 through y1.
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


class Trainer:
    def __init__(self):
        self.model1 = Model1()
        self.model2 = Model2()
        params = list(self.model1.parameters()) + list(self.model2.parameters())
        self.optimizer = torch.optim.SGD(params, lr=0.1)

    def step(self):
        self.optimizer.step()

    def train_batch(self, X, y):
        model1, model2 = self.model1, self.model2
        self.optimizer.zero_grad()
        y1 = model1(X)
        y2 = model2(y1)
        criterion = nn.NLLLoss()
        loss = criterion(y2, y)
        loss.backward()
        y1.backward(y1.grad) # it breaks here
        self.step()
        return loss.item()


trainer = Trainer()
X = torch.randn(8, 1, 6, 6)
y = torch.randint(0, 3, (8,))
trainer.train_batch(X, y)
