"""Fine-tuning a pretrained backbone for a second task with the backbone meant to be frozen, written
`backbone.requires_grad = False`: that sets a plain attribute on the module, every weight inside still requires
grad, and the optimizer (built over all the parameters, as it may be when the frozen ones have no gradient)
updates the backbone too. The first task, which shares the backbone, is forgotten: its test accuracy falls
from 0.99 to 0.58 (near chance) in 50 steps, against 0.99 for the fixed twin (`freeze_ineffective_fixed.py`, which writes
`backbone.requires_grad_(False)`). Nothing raises.

`gradviz run` reports `freeze-ineffective` (warning) at the `backbone.requires_grad = False` line, with the
step that updated the backbone as related.
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

backbone.requires_grad = False
fit(head_b, task_b, list(backbone.parameters()) + list(head_b.parameters()), 50, 0.2)  # fine-tuning
print(f"task B accuracy {accuracy(head_b, task_b):.2f}, task A accuracy now {accuracy(head_a, task_a):.2f}")
