import torch

torch.manual_seed(0)
w = torch.randn(3, requires_grad=True)
opt = torch.optim.SGD([w], lr=0.01)
x = torch.randn(5, 3)
for step in range(1100):
    opt.zero_grad()
    h = x @ w
    loss = (h ** 2).mean()
    loss.backward()
    if step == 1050:
        print(h.grad)  # MARK
    opt.step()
