"""The seed's hook answer (`register_hook` + `loss.backward(retain_graph=True)`), run as a training loop.

The answer extracts y1's gradient with a hook and keeps the graph for a second backward:

    y1.register_hook(extract(y1))
    loss.backward(retain_graph=True)
    y1.backward(y1.grad)

The asker reports that it "initially runs fine but later causes OOM": retain_graph=True keeps every graph's saved
buffers after backward, so anything that keeps a graph alive now keeps its buffers too. Here, as in most training
loops, the loss is summed for a learning curve with `running_loss += loss`, which chains each iteration's graph to
the next one: retained memory grows every iteration. (And since y1 is connected to the loss, loss.backward()
already reached model1: y1.backward(y1.grad) adds model1's gradient a second time.)

`gradviz run` reports:

    retained-graph (warning)  at the `running_loss += loss` line, with the bytes held after each iteration and the
                              retain_graph=True backward and the hook as related lines

The fix is seed_sequential_fix.py: one graph, one backward, `running_loss += loss.item()`.
"""

import gradviz as torch
import gradviz.nn as nn
import gradviz.nn.functional as F

torch.manual_seed(42)


class Model1(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 32)

    def forward(self, x):
        return torch.relu(self.fc(x))


class Model2(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(32, 4)

    def forward(self, x):
        return F.log_softmax(self.fc(x), dim=1)


def extract(V):
    """Gradient extractor.
    """
    def hook(grad):
        V.grad = grad
    return hook


model1 = Model1()
model2 = Model2()
criterion = nn.NLLLoss()
optimizer = torch.optim.SGD(list(model1.parameters()) + list(model2.parameters()), lr=0.05)

running_loss = 0
for _ in range(30):
    X = torch.randn(32, 16)
    y = torch.randint(0, 4, (32,))
    optimizer.zero_grad()
    y1 = model1(X)
    y2 = model2(y1)
    loss = criterion(y2, y)
    y1.register_hook(extract(y1))
    loss.backward(retain_graph=True)
    y1.backward(y1.grad)
    optimizer.step()
    running_loss += loss
print(f"mean loss: {running_loss.item() / 30:.4f}")
