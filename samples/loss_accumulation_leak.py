"""A correct training loop except for one line: `total_loss += loss`.

`loss` is a Variable with a graph, so `total_loss` becomes one too: each iteration's addition takes the previous
total as an input, which chains every iteration's graph to the next and keeps them all alive — the PyTorch FAQ's
classic memory leak. `gradviz run` reports:

    retained-graph (warning)  at the `total_loss += loss` line: graphs alive grow by one each iteration

The fix: `total_loss += loss.item()`.
"""

import gradviz as torch
import gradviz.nn as nn

torch.manual_seed(0)

model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1))
criterion = nn.MSELoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

X = torch.randn(64, 10)
y = X.sum(dim=1, keepdim=True)
total_loss = 0
for _ in range(40):
    optimizer.zero_grad()
    loss = criterion(model(X), y)
    loss.backward()
    optimizer.step()
    total_loss += loss
print(f"mean loss: {total_loss.item() / 40:.4f}")
