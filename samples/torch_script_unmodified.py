"""The seed question's code, pasted as is into a plain PyTorch script (run it with `gradviz run --torch`).

Only what the question leaves out was added so that it runs: two single-layer models, data, and a class that
owns `self.step()`. The two snippets are pasted unmodified as `works()` and `breaks()`: the first bridges the
two models by hand with the deprecated `Variable(y1.data, ...)`, the second chains them and then calls
`y1.backward(y1.grad)`, which raises `RuntimeError: grad can be implicitly created only for scalar outputs`
(exit status 1), in PyTorch and in gradviz alike. `gradviz run --torch` reports:

    graph-cut (info)               at the `v = Variable(y1.data, ...)` line: two graphs bridged by hand
    none-grad (warning)            at the `y1.backward(y1.grad)` line: y1 is not a leaf, so y1.grad is None
    nonscalar-backward (error)     at the same line, linked to the none-grad read
"""

import torch
import torch.nn as nn
from torch.autograd import Variable

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
        self.log_softmax = nn.LogSoftmax(dim=1)

    def forward(self, x):
        return self.log_softmax(self.fc(x.flatten(1)))


class Trainer:
    def __init__(self):
        self.model1 = Model1()
        self.model2 = Model2()
        params = list(self.model1.parameters()) + list(self.model2.parameters())
        self.optimizer = torch.optim.SGD(params, lr=0.1)

    def step(self):
        self.optimizer.step()
        self.optimizer.zero_grad()

    def works(self, X, y, training=True):
        model1, model2 = self.model1, self.model2
        y1 = model1(X)
        v = Variable(y1.data, requires_grad=training)         # Its all about this line!
        y2 = model2(v)
        criterion = nn.NLLLoss()
        loss = criterion(y2, y)
        loss.backward()
        y1.backward(v.grad)
        self.step()

    def breaks(self, X, y):
        model1, model2 = self.model1, self.model2
        y1 = model1(X)
        y2 = model2(y1)
        criterion = nn.NLLLoss()
        loss = criterion(y2, y)
        loss.backward()
        y1.backward(y1.grad) # it breaks here
        self.step()


trainer = Trainer()
X = torch.randn(8, 1, 6, 6)
y = torch.randint(0, 3, (8,))
trainer.works(X, y)
trainer.breaks(X, y)
