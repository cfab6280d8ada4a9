"""A hand-written autograd Function with a wrong backward: the Legendre polynomial P3(x) = (5x^3 - 3x) / 2,
used to fit sin(x) with y = a + b * P3(c + d * x), as PyTorch's own tutorial on custom Functions does.

Its backward has a wrong coefficient (P3'(x) is 1.5 * (5x^2 - 1), not 1.5 * (5x^2 - 3)). Nothing raises: the
loop trains, to the wrong place. `gradviz run` reports wrong-backward at the `LegendrePolynomial3.apply` line,
naming the input and where backward is defined. With the right coefficient it reports nothing.
"""

import math

import gradviz as torch


class LegendrePolynomial3(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return 0.5 * (5 * x ** 3 - 3 * x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * 1.5 * (5 * x ** 2 - 3)  # the mistake: P3'(x) = 1.5 * (5 x^2 - 1)


torch.manual_seed(0)
x = torch.linspace(-math.pi, math.pi, 2000, dtype=torch.float64)
y = torch.sin(x)

a = torch.full((), 0.0, dtype=torch.float64, requires_grad=True)
b = torch.full((), -1.0, dtype=torch.float64, requires_grad=True)
c = torch.full((), 0.0, dtype=torch.float64, requires_grad=True)
d = torch.full((), 0.3, dtype=torch.float64, requires_grad=True)

learning_rate = 5e-6
for _ in range(300):
    y_pred = a + b * LegendrePolynomial3.apply(c + d * x)
    loss = (y_pred - y).pow(2).sum()
    loss.backward()
    with torch.no_grad():
        for p in (a, b, c, d):
            p -= learning_rate * p.grad
            p.grad = None

print(f"loss after 300 steps: {loss.item():.1f}")
print(f"y = {a.item():.3f} + {b.item():.3f} * P3({c.item():.3f} + {d.item():.3f} x)")
