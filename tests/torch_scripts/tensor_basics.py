"""First steps with tensors, as an introduction would show them: creating, printing, reshaping, in-place and
out-of-place arithmetic, numpy interop (shared memory both ways), dtypes, and a first gradient."""
import numpy as np
import torch

torch.manual_seed(21)

grid = torch.arange(12).reshape(3, 4)
print(grid)
print("shape", grid.shape, "dims", grid.dim(), "elements", grid.numel())
print("row 1:", grid[1], "column 2:", grid[:, 2])
print(grid.view(2, 6))
print(grid.t().contiguous().view(-1)[:5])

noise = torch.randn(2, 3)
print(noise)
print(torch.zeros(2, 2, dtype=torch.float64))
print(torch.full((2, 3), 0.5) + noise)
total = noise.clone()
total.add_(1.0).mul_(2.0)
print(total)
print(torch.cat([noise, total], dim=0).shape, torch.stack([noise, total]).shape)

as_float = grid.float() / 3
print(as_float)
print("mean", as_float.mean().item(), "max per row", as_float.max(dim=1).values)
print("dtype:", grid.dtype, "->", as_float.dtype)

shared = np.linspace(0.0, 1.0, 4)
view = torch.from_numpy(shared)
shared *= 10
print(view)
back = torch.ones(3)
arr = back.numpy()
back.add_(4)
print(arr)

w = torch.tensor([1.0, -2.0, 3.0], requires_grad=True)
score = (w ** 2).sum() * 0.5
print(score)
score.backward()
print(w.grad, w.grad is not None)
