"""The fixed twin of `freeze_ineffective.py`: `backbone.requires_grad_(False)` sets every backbone parameter's
flag, so they get no gradient and the optimizer skips them; only the new head trains. The first task keeps its
test accuracy (0.99; 0.58 when the backbone trains). The second task reaches 0.65 on the frozen features (0.93
when the backbone is trained too, which is what unfreezing on purpose would buy).

`gradviz run` reports nothing (clean).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

points = torch.randn(1500, 12)
task_a = (points[:, :3].sum(1) > 0).long()
task_b = (points[:, 3:6].sum(1) > 0).long()

backbone = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU())
head_a, head_b = nn.Linear(32, 2), nn.Linear(32, 2)


def fit(head, labels, parameters, steps, lr):
    optimizer = torch.optim.SGD(parameters, lr=lr, momentum=0.9)
    for step in range(steps):
        batch = torch.randint(0, 1200, (64,))
        optimizer.zero_grad()
        loss = F.cross_entropy(head(backbone(points[batch])), labels[batch])
        loss.backward()
        optimizer.step()


def accuracy(head, labels):
    with torch.no_grad():
        return (head(backbone(points[1200:])).argmax(1) == labels[1200:]).float().mean().item()


fit(head_a, task_a, list(backbone.parameters()) + list(head_a.parameters()), 80, 0.05)  # pretraining
print(f"task A accuracy after pretraining {accuracy(head_a, task_a):.2f}")

backbone.requires_grad_(False)
fit(head_b, task_b, list(backbone.parameters()) + list(head_b.parameters()), 50, 0.2)  # fine-tuning
print(f"task B accuracy {accuracy(head_b, task_b):.2f}, task A accuracy now {accuracy(head_a, task_a):.2f}")
