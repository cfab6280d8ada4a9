"""Mistake: `torch.randn(3, requires_grad=True) * 0.1` is the product, not the tensor made with
requires_grad=True, so `w` is not a leaf: backward leaves `w.grad` None and the optimizer refuses it
("can't optimize a non-leaf Tensor"). The fix: `w = (torch.randn(3) * 0.1).requires_grad_()`."""
import torch

torch.manual_seed(15)
x = torch.randn(10, 3)
y = x.sum(dim=1, keepdim=True)

w = torch.randn(3, 1, requires_grad=True) * 0.1
b = torch.zeros(1, requires_grad=True)
loss = ((x @ w + b - y) ** 2).mean()
loss.backward()
print("b.grad:", [round(v, 5) for v in b.grad.tolist()])
print("w.grad:", w.grad)
optimizer = torch.optim.SGD([w, b], lr=0.1)
