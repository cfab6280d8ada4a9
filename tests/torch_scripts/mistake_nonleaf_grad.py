"""Mistake: reading .grad of an intermediate result. `hidden` is the output of a layer, not a leaf, so backward
does not keep its gradient and `hidden.grad` is None (PyTorch only warns). The fix: `hidden.retain_grad()`
before backward, or register a hook."""
import torch
import torch.nn as nn

torch.manual_seed(10)
layer = nn.Linear(3, 2)
x = torch.randn(4, 3)

hidden = layer(x)
loss = torch.tanh(hidden).sum()
loss.backward()

print("weight grad shape:", tuple(layer.weight.grad.shape))
print("weight grad sum:", round(layer.weight.grad.sum().item(), 5))
print("hidden is a leaf:", hidden.is_leaf)
print("hidden.grad:", hidden.grad)
