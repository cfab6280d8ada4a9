"""The fixed twin of `sigmoid_before_bce_with_logits.py`: the model outputs logits, `nn.BCEWithLogitsLoss` takes
them, and `torch.sigmoid` is applied only to predict. Same data, same steps.

`gradviz run` reports nothing (clean).
"""

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

features = torch.randn(800, 10)
weights = torch.randn(10)
labels = ((features @ weights + 0.5 * features[:, 0] * features[:, 1]) > 0.8).float()  # about a third positive
train = DataLoader(TensorDataset(features[:640], labels[:640]), batch_size=64, shuffle=True)
test_x, test_y = features[640:], labels[640:]

model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1), nn.Flatten(0))
criterion = nn.BCEWithLogitsLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)

for epoch in range(5):
    for x, y in train:
        optimizer.zero_grad()
        scores = model(x)
        loss = criterion(scores, y)
        loss.backward()
        optimizer.step()

with torch.no_grad():
    predicted = (torch.sigmoid(model(test_x)) > 0.5).float()
    accuracy = (predicted == test_y).float().mean().item()
print(f"last loss {loss.item():.3f}, test accuracy {accuracy:.2f}")
