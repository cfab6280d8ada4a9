"""A two-layer MLP learns to tell three Gaussian blobs apart, fed in shuffled mini-batches by a DataLoader."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

# 40 points around each of three centres
centres = torch.tensor([[2.0, 0.0], [-1.0, 1.7], [-1.0, -1.7]])
labels = torch.arange(3).repeat_interleave(40)
points = centres[labels] + 0.6 * torch.randn(120, 2)

dataset = TensorDataset(points, labels)
loader = DataLoader(dataset, batch_size=16, shuffle=True)


class BlobNet(nn.Module):
    def __init__(self, hidden=32):
        super().__init__()
        self.fc1 = nn.Linear(2, hidden)
        self.fc2 = nn.Linear(hidden, 3)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


model = BlobNet()
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
print("parameters:", sum(p.numel() for p in model.parameters()))
print("batches per epoch:", len(loader))

for epoch in range(4):
    model.train()
    running = 0.0
    for xb, yb in loader:
        optimizer.zero_grad()
        loss = criterion(model(xb), yb)
        loss.backward()
        optimizer.step()
        running += loss.item() * xb.size(0)
    print(f"epoch {epoch}: loss {running / len(dataset):.5f}")

model.eval()
with torch.no_grad():
    logits = model(points)
    predicted = logits.argmax(dim=1)
    accuracy = (predicted == labels).float().mean().item()
    confidence = F.softmax(logits, dim=1).max(dim=1).values.mean().item()
print(f"train accuracy {accuracy:.4f}, mean confidence {confidence:.5f}")
print("logits shape:", logits.shape)
