"""Mistake: an activation that sigmoid saved for its backward is changed in place (`hidden[:, 0] = 0`), so
backward raises "one of the variables needed for gradient computation has been modified by an inplace
operation". The fix: build a new tensor (`hidden = hidden * mask`) instead of writing into the saved one."""
import torch
import torch.nn as nn

torch.manual_seed(12)
fc1, fc2 = nn.Linear(5, 6), nn.Linear(6, 1)
x = torch.randn(8, 5)

hidden = torch.sigmoid(fc1(x))
hidden[:, 0] = 0  # silence the first unit
out = fc2(hidden).sum()
print("forward ran:", round(out.item(), 5))
out.backward()
print("not reached")
