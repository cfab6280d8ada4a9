"""A PyTorch 2 tutorial habit: wrap the model in torch.compile before training. gradviz's engine runs eagerly and
has no compiler, so the run stops at that line with one line naming `torch.compile`, and the report says that
nothing after it was checked."""
import torch
import torch.nn as nn

torch.manual_seed(18)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
print("parameters:", sum(p.numel() for p in model.parameters()))
model = torch.compile(model)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(16, 4), torch.randn(16, 1)
for _ in range(3):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
print(f"loss {loss.item():.4f}")
