"""Fine-tuning the seed notes' way: freeze a "pretrained" CNN, replace its last layer, train only that layer.

    for param in model.parameters():
        param.requires_grad = False
    model.fc = nn.Linear(256, 5)      # new modules' parameters require grad
    optimizer = optim.SGD(model.fc.parameters(), lr=1e-2, momentum=0.9)

Because no input of the frozen convolutions requires grad, they record no graph at all: the only saved buffers
are the last layer's (and the loss's), which is the point the notes make. `gradviz run` reports nothing (clean).
"""

import gradviz as torch
import gradviz.nn as nn
import gradviz.optim as optim

torch.manual_seed(0)


class SmallNet(nn.Module):
    """A two-block CNN standing in for a pretrained backbone with a classifier head `fc`."""

    def __init__(self, classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(16 * 4 * 4, classes)

    def forward(self, x):
        return self.fc(self.flatten(self.features(x)))


def pretrain(model, steps=3):
    """A few steps on other data, so the weights are not just their initial values."""
    opt = optim.SGD(model.parameters(), lr=0.01)
    for _ in range(steps):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(torch.randn(8, 3, 16, 16)), torch.randint(0, 10, (8,)))
        loss.backward()
        opt.step()


model = SmallNet()
pretrain(model)

for param in model.parameters():
    param.requires_grad = False
# Replace the last fully-connected layer
# Parameters of newly constructed modules have requires_grad=True by default
model.fc = nn.Linear(16 * 4 * 4, 5)
# Optimize only the classifier
optimizer = optim.SGD(model.fc.parameters(), lr=1e-2, momentum=0.9)
criterion = nn.CrossEntropyLoss()

X = torch.randn(16, 3, 16, 16)
y = torch.randint(0, 5, (16,))
for _ in range(20):
    optimizer.zero_grad()
    loss = criterion(model(X), y)
    loss.backward()
    optimizer.step()
trainable = [name for name, p in model.named_parameters() if p.requires_grad]
print("trained:", trainable, f"loss {loss.item():.4f}")
