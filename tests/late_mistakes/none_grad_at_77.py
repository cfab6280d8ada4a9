import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(16, 4), torch.randn(16, 1)
for step in range(100):
    opt.zero_grad()
    h = model[0](x)
    out = model[2](model[1](h))
    loss = ((out - y) ** 2).mean()
    loss.backward()
    if step == 77:
        print("grad of h:", h.grad)  # MARK
    opt.step()
