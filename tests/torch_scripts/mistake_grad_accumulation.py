"""Mistake: no optimizer.zero_grad() in the loop, so backward keeps adding into .grad and each step moves by
the sum of every gradient so far; the loss stops falling and oscillates. The fix: zero the gradients once per
step, before backward."""
import torch
import torch.nn as nn

torch.manual_seed(17)
model = nn.Linear(3, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
x = torch.randn(32, 3)
y = x @ torch.tensor([[1.0], [2.0], [-1.0]])

for step in range(12):
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    if step % 3 == 2:
        print(f"step {step + 1}: loss {loss.item():.5f} grad norm {model.weight.grad.norm().item():.4f}")
