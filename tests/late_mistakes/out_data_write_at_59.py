import torch
import torch.nn as nn

torch.manual_seed(0)
lin = nn.Linear(4, 4)
opt = torch.optim.SGD(lin.parameters(), lr=0.01)
x = torch.randn(8, 4)
for step in range(80):
    opt.zero_grad()
    e = torch.exp(lin(x))
    if step == 59:
        torch.clamp(e.data, max=1.0, out=e.data)  # MARK
    loss = e.sum()
    loss.backward()
    opt.step()
