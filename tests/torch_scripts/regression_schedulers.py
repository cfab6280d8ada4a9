"""Linear regression trained three times, each with a different learning-rate schedule: StepLR, CosineAnnealingLR
and ReduceLROnPlateau (which watches the loss)."""
import torch
import torch.nn as nn
from torch.optim.lr_scheduler import CosineAnnealingLR, ReduceLROnPlateau, StepLR

torch.manual_seed(5)
X = torch.randn(64, 2)
y = X @ torch.tensor([[3.0], [-2.0]]) + 0.5 + 0.1 * torch.randn(64, 1)


def fit(make_scheduler, epochs=16):
    model = nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.2)
    scheduler = make_scheduler(optimizer)
    loss_fn = nn.MSELoss()
    rates = []
    for _ in range(epochs):
        optimizer.zero_grad()
        loss = loss_fn(model(X), y)
        loss.backward()
        optimizer.step()
        rates.append(optimizer.param_groups[0]["lr"])
        if isinstance(scheduler, ReduceLROnPlateau):
            scheduler.step(loss.item())
        else:
            scheduler.step()
    return model, loss.item(), rates


schedules = {
    "step": lambda opt: StepLR(opt, step_size=4, gamma=0.5),
    "cosine": lambda opt: CosineAnnealingLR(opt, T_max=16, eta_min=0.01),
    "plateau": lambda opt: ReduceLROnPlateau(opt, mode="min", factor=0.5, patience=1,
                                          threshold=0.02, threshold_mode="abs"),
}
for name, make in schedules.items():
    model, final_loss, rates = fit(make)
    weights = [round(w, 4) for w in model.weight.view(-1).tolist()]
    print(f"{name:8s} loss {final_loss:.6f} weights {weights} bias {model.bias.item():.4f}")
    print("         lr", [round(r, 4) for r in rates])
