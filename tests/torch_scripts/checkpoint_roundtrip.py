"""Train a few steps, save the model's state_dict and the optimizer's state with torch.save into a temporary
folder, load both into fresh objects with torch.load, and check that training resumes exactly where it stopped."""
import os
import tempfile

import torch
import torch.nn as nn

torch.manual_seed(7)
X = torch.randn(40, 5)
y = (X[:, :1] * 2 - X[:, 1:2]).tanh()


def make_model():
    return nn.Sequential(nn.Linear(5, 12), nn.ReLU(), nn.Linear(12, 1))


def train(model, optimizer, steps):
    for _ in range(steps):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(X), y)
        loss.backward()
        optimizer.step()
    return loss.item()


model = make_model()
optimizer = torch.optim.Adam(model.parameters(), lr=0.01, betas=(0.8, 0.99))
print(f"after 5 steps: {train(model, optimizer, 5):.6f}")

with tempfile.TemporaryDirectory() as folder:
    path = os.path.join(folder, "checkpoint.pt")
    torch.save({"epoch": 5, "model": model.state_dict(), "optimizer": optimizer.state_dict()}, path)
    torch.save(X[:3], os.path.join(folder, "inputs.pt"))
    print("checkpoint written:", os.path.getsize(path) > 0)
    checkpoint = torch.load(path)
    first_rows = torch.load(os.path.join(folder, "inputs.pt"))

print("keys:", sorted(checkpoint["model"]))
print("epoch:", checkpoint["epoch"], "betas:", checkpoint["optimizer"]["param_groups"][0]["betas"])
print("adam steps:", [float(s["step"]) for s in checkpoint["optimizer"]["state"].values()])
print("tensor round trip:", torch.equal(first_rows, X[:3]))

restored = make_model()  # different random weights until the state is loaded
restored.load_state_dict(checkpoint["model"])
restored_optimizer = torch.optim.Adam(restored.parameters(), lr=0.5)
restored_optimizer.load_state_dict(checkpoint["optimizer"])
print("restored lr:", restored_optimizer.param_groups[0]["lr"])

original_loss = train(model, optimizer, 3)
restored_loss = train(restored, restored_optimizer, 3)
print(f"after 8 steps: {original_loss:.6f} / {restored_loss:.6f}")
gap = max((a - b).abs().max().item() for a, b in zip(model.parameters(), restored.parameters()))
print("largest parameter difference:", gap)
