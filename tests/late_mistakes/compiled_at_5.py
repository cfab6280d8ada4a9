import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
run = model
for step in range(10):
    if step == 5:  # compiled late, on a light iteration: torch._dynamo is first imported here (no torch.optim)
        run = torch.compile(model, backend="aot_eager", dynamic=True)  # MARK
    x, y = torch.randn(16 + step, 4), torch.randn(16 + step, 1)
    model.zero_grad()
    loss = nn.functional.mse_loss(run(x), y)
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(p.grad, alpha=-0.01)
print(f"loss {loss.item():.4f}")
