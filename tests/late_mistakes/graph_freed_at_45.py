import torch
import torch.nn as nn

torch.manual_seed(0)
lin = nn.Linear(4, 1)
opt = torch.optim.SGD(lin.parameters(), lr=0.01)
x = torch.randn(8, 4)
for step in range(70):
    opt.zero_grad()
    out = torch.tanh(lin(x)).sum()
    out.backward()
    if step == 45:
        try:
            out.backward()  # MARK
        except RuntimeError as e:
            print("caught:", str(e)[:50])
    opt.step()
