"""Fit sin(x) on [-pi, pi] with a cubic a + b x + c x^2 + d x^3, using raw tensors and hand-written gradient
descent: the update runs under torch.no_grad() and each gradient is zeroed after use."""
import math

import torch

torch.manual_seed(9)
x = torch.linspace(-math.pi, math.pi, 200)
y = torch.sin(x)

a = torch.randn((), requires_grad=True)
b = torch.randn((), requires_grad=True)
c = torch.randn((), requires_grad=True)
d = torch.randn((), requires_grad=True)

learning_rate = 1e-6
for t in range(600):
    prediction = a + b * x + c * x ** 2 + d * x ** 3
    loss = (prediction - y).pow(2).sum()
    if t % 150 == 149:
        print(f"step {t + 1}: loss {loss.item():.3f}")
    loss.backward()
    with torch.no_grad():
        for p in (a, b, c, d):
            p -= learning_rate * p.grad
            p.grad.zero_()

print(f"y = {a.item():.4f} + {b.item():.4f} x + {c.item():.4f} x^2 + {d.item():.4f} x^3")
print("leaves still:", all(p.is_leaf and p.requires_grad for p in (a, b, c, d)))
