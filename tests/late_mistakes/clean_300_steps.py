"""A correct training loop that uses the calls the light watch wraps, every step: in-place activations and
additions, .detach() and .item() for logging, a numpy metric read during the forward, an out= write into a buffer
no graph saved, a gradient hook, .data for a manual parameter clamp after the step, a leaf's .grad."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(8, 8), nn.Linear(8, 8)
        self.act = nn.ReLU(inplace=True)

    def forward(self, x):
        out = self.act(self.fc1(x))
        out = self.fc2(out)
        out += x  # in place on a value no node saved
        return self.act(out)


model = nn.Sequential(nn.Linear(4, 8), Block(), nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(32, 4), torch.randn(32, 1)
running, seen, hits, grad_norms = 0.0, [], 0.0, []
buffer = torch.empty(32, 1)
for _ in range(300):
    opt.zero_grad()
    pred = model(x)
    hits += float((pred.detach().numpy() > 0).mean())  # read, never written
    torch.sub(pred.detach(), y, out=buffer)  # into a buffer of its own
    pred.register_hook(lambda g: grad_norms.append(float(g.norm())))
    loss = ((pred - y) ** 2).mean()
    loss.backward()
    norm = model[0].weight.grad.norm().item()
    opt.step()
    with torch.no_grad():
        model[2].weight.data.clamp_(-1, 1)
    running += loss.item()
    seen.append(loss.detach())
print(f"{running / 300:.4f} {norm:.4f} {len(seen)}")
