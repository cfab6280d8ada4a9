import torch
import torch.nn as nn

torch.manual_seed(0)
lin = nn.Linear(4, 4)
opt = torch.optim.SGD(lin.parameters(), lr=0.01)
x = torch.randn(8, 4)
for step in range(80):
    opt.zero_grad()
    h = torch.sigmoid(lin(x))
    if step == 57:
        with torch.no_grad():
            torch.mul(h, 0.5, out=h)  # MARK
    loss = h.sum()
    try:
        loss.backward()
    except RuntimeError as e:
        print("caught:", str(e)[:60])
    opt.step()
