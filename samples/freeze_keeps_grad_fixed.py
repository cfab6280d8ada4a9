"""The fixed twin of `freeze_keeps_grad.py`: the freeze also drops each frozen parameter's gradient
(`p.grad = None`), so `zero_grad(set_to_none=False)` has nothing to zero and SGD skips the backbone: it moves by
0% after the freeze (23% in the buggy script), and task A keeps its accuracy (0.98; 0.93 in the buggy script).
Task B's head trains on the frozen features as intended.

`gradviz run` reports nothing (clean).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

points = torch.randn(1500, 12)
task_a = (points[:, :3].sum(1) > 0).long()
task_b = (points[:, 3:6].sum(1) > 0).long()

backbone = nn.Sequential(nn.Linear(12, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
head_a, head_b = nn.Linear(64, 2), nn.Linear(64, 2)
model = nn.ModuleDict({"backbone": backbone, "head_a": head_a, "head_b": head_b})
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=2e-3)


def accuracy(head, labels):
    with torch.no_grad():
        return (head(backbone(points[1200:])).argmax(1) == labels[1200:]).float().mean().item()


for step in range(80):  # pretraining
    batch = torch.randint(0, 1200, (64,))
    optimizer.zero_grad(set_to_none=False)
    loss_a = F.cross_entropy(head_a(backbone(points[batch])), task_a[batch])
    loss_a.backward()
    optimizer.step()
print(f"task A accuracy after pretraining {accuracy(head_a, task_a):.2f}")

for p in backbone.parameters():  # task A learnt: keep the backbone, train a head for task B on its features
    p.requires_grad = False
    p.grad = None
frozen = [p.clone() for p in backbone.parameters()]
for step in range(120):
    batch = torch.randint(0, 1200, (64,))
    optimizer.zero_grad(set_to_none=False)
    loss_b = F.cross_entropy(head_b(backbone(points[batch])), task_b[batch])
    loss_b.backward()
    optimizer.step()

moved = sum((p - f).norm() ** 2 for p, f in zip(backbone.parameters(), frozen)) ** 0.5
print(f"frozen backbone moved by {(moved / sum(f.norm() ** 2 for f in frozen) ** 0.5).item():.0%}; "
      f"task A accuracy {accuracy(head_a, task_a):.2f}, task B accuracy {accuracy(head_b, task_b):.2f}")
