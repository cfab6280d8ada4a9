"""Mistake: the output of sigmoid, which sigmoid saved for its backward, is zeroed through `.data`. The version
counter does not see writes through `.data`, so PyTorch raises nothing and the input's gradient silently comes
out all zeros (sigmoid's gradient is out * (1 - out)). The fix: `gate = gate * 0` or `masked_fill`, a new
tensor, never `.data`."""
import torch

torch.manual_seed(16)
x = torch.randn(5, requires_grad=True)
gate = torch.sigmoid(x)
gate.data.zero_()  # meant to reset the gate before the next use
loss = (gate * torch.arange(5.0)).sum()
loss.backward()
print("x.grad:", x.grad.tolist())
