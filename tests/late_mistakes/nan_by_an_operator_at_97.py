import torch
import torch.nn as nn

torch.manual_seed(0)
lin = nn.Linear(4, 1)
opt = torch.optim.SGD(lin.parameters(), lr=0.001)
x = torch.randn(8, 4)
for step in range(120):
    opt.zero_grad()
    z = lin(x)
    shift = 100.0 if step == 97 else 0.0
    r = (z * z - shift) ** 0.5  # MARK
    loss = r.mean()
    loss.backward()  # BACKWARD
    opt.step()
