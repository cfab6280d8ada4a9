"""A tensor created with requires_grad=True and scaled on the same line is not a leaf.

`torch.randn(3, 1, requires_grad=True) * 0.1` makes two tensors: the random one, which is the leaf that backward
fills, and `w`, the output of the multiplication, which is not a leaf. Nothing names the leaf, so after
`loss.backward()` the script reads `w.grad` and gets None; then the optimizer refuses `w` with PyTorch's own
error (exit status 1):

    ValueError: can't optimize a non-leaf Tensor

`gradviz run` reports:

    none-grad (warning)          at the `print(... w.grad)` line: `w` is MulBackward's output, applied to a
                                 tensor created with requires_grad=True on the same line; the hint rewrites
                                 that line as `w = (torch.randn(3, 1) * 0.1).requires_grad_()`
    optimize-non-leaf (error)    at the `torch.optim.SGD([w, b], ...)` line, with the same fix

The fix: `w = (torch.randn(3, 1) * 0.1).requires_grad_()`, or create `w` with requires_grad=True and scale it
under `torch.no_grad()` (`w.mul_(0.1)`).
"""

import gradviz as torch

torch.manual_seed(0)

x = torch.randn(16, 3)
y = x @ torch.tensor([[1.0], [-2.0], [0.5]]) + 0.3

w = torch.randn(3, 1, requires_grad=True) * 0.1   # the mistake: w is not a leaf
b = torch.zeros(1, requires_grad=True)

loss = ((x @ w + b - y) ** 2).mean()
loss.backward()
print("b.grad:", b.grad)
print("w.grad:", w.grad)                           # None

optimizer = torch.optim.SGD([w, b], lr=0.1)        # ValueError: can't optimize a non-leaf Tensor
