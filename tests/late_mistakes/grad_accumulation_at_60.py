import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(16, 4), torch.randn(16, 1)
for step in range(90):
    if step != 60:
        opt.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()  # MARK
    opt.step()
