import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(16, 4), torch.randint(0, 3, (16,))
for step in range(100):
    opt.zero_grad()
    logits = model(x)
    if step == 77:  # a second loss branch, normalised over the wrong dimension
        log_probs = F.log_softmax(logits, dim=0)  # MARK
    else:
        log_probs = F.log_softmax(logits, dim=1)
    loss = F.nll_loss(log_probs, y)
    loss.backward()
    opt.step()
