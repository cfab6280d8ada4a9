"""A small CNN with BatchNorm2d and Dropout2d learns whether an 8x8 image holds a vertical or a horizontal bar."""
import torch
import torch.nn as nn

torch.manual_seed(1)


def make_bars(n):
    images = torch.zeros(n, 1, 8, 8)
    kinds = torch.randint(0, 2, (n,))
    where = torch.randint(1, 7, (n,))
    for i in range(n):
        if kinds[i] == 0:
            images[i, 0, :, where[i]] = 1.0
        else:
            images[i, 0, where[i], :] = 1.0
    return images + 0.3 * torch.randn(n, 1, 8, 8), kinds


class BarNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, kernel_size=3, padding=1, bias=False),  # BatchNorm supplies the shift
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Dropout2d(p=0.2),
            nn.Conv2d(8, 16, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.classifier = nn.Linear(16, 2)

    def forward(self, x):
        x = self.features(x)
        return self.classifier(torch.flatten(x, 1))


train_x, train_y = make_bars(48)
test_x, test_y = make_bars(32)
model = BarNet()
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
loss_fn = nn.CrossEntropyLoss()

for step in range(12):
    model.train()
    optimizer.zero_grad()
    loss = loss_fn(model(train_x), train_y)
    loss.backward()
    optimizer.step()
    if step % 4 == 3:
        print(f"step {step + 1:2d}  loss {loss.item():.5f}")

model.eval()
with torch.no_grad():
    test_logits = model(test_x)
correct = (test_logits.argmax(1) == test_y).sum().item()
print(f"test accuracy {correct}/{len(test_y)}")
bn = model.features[1]
print("batches tracked:", bn.num_batches_tracked.item())
print("running mean[:3]:", [round(v, 4) for v in bn.running_mean[:3].tolist()])
print("running var[:3]:", [round(v, 4) for v in bn.running_var[:3].tolist()])
print("feature map:", tuple(model.features[:4](test_x).shape))
