"""A correct small CNN training loop on synthetic images: zero_grad, forward, loss, backward, step — 100 iterations.

`gradviz run` reports nothing (clean): no error, no warning, no info.
"""

import gradviz as torch
import gradviz.nn as nn

torch.manual_seed(0)

# Two classes of 8x8 images: a bright left half or a bright right half, with noise.
labels = torch.randint(0, 2, (32,))
images = torch.randn(32, 1, 8, 8)
images[:, :, :, :4] += 0.5 * (labels == 0).float().reshape(32, 1, 1, 1)
images[:, :, :, 4:] += 0.5 * (labels == 1).float().reshape(32, 1, 1, 1)

model = nn.Sequential(
    nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(4, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(8 * 2 * 2, 2),
)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)

for _ in range(100):
    optimizer.zero_grad()
    loss = criterion(model(images), labels)
    loss.backward()
    optimizer.step()
accuracy = (model(images).argmax(dim=1) == labels).float().mean().item()
print(f"loss {loss.item():.4f}, accuracy {accuracy:.2f}")
