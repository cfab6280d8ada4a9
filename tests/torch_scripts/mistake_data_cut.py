"""Mistake: the head is fed `features.data`, which has no history, so the loss's graph stops there and the
encoder never receives a gradient: its weights stay at their initial values while the head trains. The fix:
pass `features` itself (use `.detach()` only when cutting the graph is intended)."""
import torch
import torch.nn as nn

torch.manual_seed(14)
encoder = nn.Linear(4, 6)
head = nn.Linear(6, 1)
optimizer = torch.optim.SGD(list(encoder.parameters()) + list(head.parameters()), lr=0.1)
x, y = torch.randn(20, 4), torch.randn(20, 1)
before = encoder.weight.clone()

for _ in range(5):
    optimizer.zero_grad()
    features = torch.relu(encoder(x))
    prediction = head(features.data)
    loss = nn.functional.mse_loss(prediction, y)
    loss.backward()
    optimizer.step()
print(f"loss {loss.item():.5f}")
print("encoder grad:", encoder.weight.grad)
print("encoder unchanged:", torch.equal(before, encoder.weight))
