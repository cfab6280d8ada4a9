import torch
import torch.nn as nn

torch.manual_seed(0)
model1, model2 = nn.Linear(4, 6), nn.Linear(6, 1)
opt = torch.optim.SGD(model1.parameters(), lr=0.01)  # (model2 is frozen: nothing it saved changes)
x, y = torch.randn(8, 4), torch.randn(8, 1)
grads = []
epoch_loss = 0.0
for step in range(100):
    opt.zero_grad()
    y1 = model1(x)
    loss = ((model2(y1) - y) ** 2).mean()
    if step >= 71:  # from here on the loop keeps every graph: a hook per step and a running total that is a tensor
        y1.register_hook(lambda g: grads.append(g.norm().item()))  # MARK
        loss.backward(retain_graph=True)  # RETAIN
        epoch_loss = epoch_loss + loss
    else:
        loss.backward()
    opt.step()
