import torch
import torch.nn as nn

torch.manual_seed(0)
lin = nn.Linear(4, 4)
opt = torch.optim.SGD(lin.parameters(), lr=0.01)
x = torch.randn(8, 4)
for step in range(80):
    opt.zero_grad()
    e = torch.exp(lin(x))
    if step == 63:
        view = e.detach().numpy()  # MARK
        view[0] = 0.0
    loss = e.sum()
    loss.backward()
    opt.step()
