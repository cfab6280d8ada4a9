import torch
import torch.nn as nn

torch.manual_seed(0)
first, second = nn.Linear(4, 8), nn.Linear(8, 1)
opt = torch.optim.SGD(list(first.parameters()) + list(second.parameters()), lr=0.01)
x, y = torch.randn(16, 4), torch.randn(16, 1)
for step in range(80):
    opt.zero_grad()
    h = torch.relu(first(x))
    if step == 66:
        h = h.detach()  # MARK
    loss = ((second(h) - y) ** 2).mean()
    loss.backward()
    opt.step()
