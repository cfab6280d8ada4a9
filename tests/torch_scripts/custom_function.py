"""A custom autograd.Function with a hand-written backward (a linear layer that also saves what backward needs),
checked with torch.autograd.gradcheck in float64 and then used inside an nn.Module for a few training steps."""
import torch
import torch.nn as nn
from torch.autograd import Function, gradcheck

torch.manual_seed(8)


class ScaledLinear(Function):
    """y = scale * (x @ w.T) + b; `scale` is a plain float that needs no gradient."""

    @staticmethod
    def forward(ctx, x, weight, bias, scale):
        ctx.save_for_backward(x, weight)
        ctx.scale = scale
        return scale * x.mm(weight.t()) + bias

    @staticmethod
    def backward(ctx, grad_out):
        x, weight = ctx.saved_tensors
        grad_x = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_x = ctx.scale * grad_out.mm(weight)
        if ctx.needs_input_grad[1]:
            grad_w = ctx.scale * grad_out.t().mm(x)
        if ctx.needs_input_grad[2]:
            grad_b = grad_out.sum(0)
        return grad_x, grad_w, grad_b, None


inputs = (torch.randn(4, 3, dtype=torch.double, requires_grad=True),
          torch.randn(2, 3, dtype=torch.double, requires_grad=True),
          torch.randn(2, dtype=torch.double, requires_grad=True), 0.5)
print("gradcheck:", gradcheck(ScaledLinear.apply, inputs, eps=1e-6, atol=1e-4))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(1, 3) * 0.1)
        self.bias = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        return ScaledLinear.apply(x, self.weight, self.bias, 2.0)


model = Model()
x = torch.randn(32, 3)
y = x @ torch.tensor([[1.0], [-1.0], [0.5]]) + 0.3
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
for _ in range(20):
    optimizer.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
print(f"loss {loss.item():.6f}")
print("weight", [round(v, 4) for v in model.weight.view(-1).tolist()], "bias", round(model.bias.item(), 4))
out = model(x)
print("has grad_fn:", out.grad_fn is not None, out.requires_grad, out.is_leaf)
