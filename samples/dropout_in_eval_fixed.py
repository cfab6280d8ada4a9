"""The fixed twin of `dropout_in_eval.py`: `F.dropout(..., training=self.training)` follows the module's mode,
so evaluation runs without dropout. Same data, same steps.

`gradviz run` reports nothing (clean).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

inputs = torch.rand(1000, 3) * 4 - 2
targets = torch.sin(inputs[:, :1] * 2) + inputs[:, 1:2] * inputs[:, 2:3] + 0.05 * torch.randn(1000, 1)
train_x, train_y, test_x, test_y = inputs[:800], targets[:800], inputs[800:], targets[800:]


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(3, 128)
        self.out = nn.Linear(128, 1)

    def forward(self, x):
        h = F.dropout(torch.tanh(self.hidden(x)), 0.4, training=self.training)
        return self.out(h)


model = Regressor()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

for epoch in range(10):
    model.train()
    for start in range(0, 800, 100):
        optimizer.zero_grad()
        loss = F.mse_loss(model(train_x[start:start + 100]), train_y[start:start + 100])
        loss.backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        error = F.mse_loss(model(test_x), test_y).sqrt().item()
print(f"last loss {loss.item():.3f}, test RMSE {error:.2f}")
