"""Mistake: the loss is computed once, outside the loop, and backpropagated in every iteration. The first
backward frees the graph's saved tensors; the second raises "Trying to backward through the graph a second
time". The fix: compute the forward pass inside the loop."""
import torch
import torch.nn as nn

torch.manual_seed(11)
model = nn.Sequential(nn.Linear(4, 8), nn.Sigmoid(), nn.Linear(8, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(16, 4), torch.randn(16, 1)

loss = nn.functional.mse_loss(model(x), y)
for step in range(3):
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step}: loss {loss.item():.5f}")
