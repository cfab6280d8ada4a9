"""A correct MLP training loop on synthetic data: zero_grad, forward, loss, backward, step — 100 iterations.

`gradviz run` reports nothing (clean): no error, no warning, no info.
"""

import gradviz as torch
import gradviz.nn as nn

torch.manual_seed(0)

X = torch.randn(128, 8)
y = (X[:, :4].sum(dim=1, keepdim=True) - X[:, 4:].sum(dim=1, keepdim=True)).tanh()

model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 16), nn.Tanh(), nn.Linear(16, 1))
criterion = nn.MSELoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

losses = []
for _ in range(100):
    optimizer.zero_grad()
    loss = criterion(model(X), y)
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
print(f"loss: {losses[0]:.4f} -> {losses[-1]:.4f}")
