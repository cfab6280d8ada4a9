import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(16, 4), torch.randn(16)
for step in range(100):
    opt.zero_grad()
    out = model(x)
    if step >= 77:  # a second loss branch, with the target's shape not matched
        loss = ((out - y) ** 2).mean()  # MARK
    else:
        loss = ((out.squeeze(1) - y) ** 2).mean()
    loss.backward()
    opt.step()
