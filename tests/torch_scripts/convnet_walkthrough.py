"""A top-level walkthrough of a small convolutional network, the way introductory tutorials go: print the
model and its parameters, backpropagate a random gradient, then a loss, look at a bias gradient before and
after zero_grad, take a few SGD steps, predict with torch.max on `outputs.data`, and save and reload the weights
(weights_only=True)."""
import os
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

torch.manual_seed(20)


class TinyConvNet(nn.Module):
    def __init__(self, classes=4):
        super().__init__()
        self.conv_a = nn.Conv2d(1, 4, 3)
        self.conv_b = nn.Conv2d(4, 8, 3)
        self.hidden = nn.Linear(8 * 2 * 2, 24)
        self.logits = nn.Linear(24, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv_a(x)), 2)  # 14 -> 12 -> 6
        x = F.max_pool2d(F.relu(self.conv_b(x)), (2, 2))  # 6 -> 4 -> 2
        x = torch.flatten(x, 1)
        return self.logits(F.relu(self.hidden(x)))


net = TinyConvNet()
print(net)
params = list(net.parameters())
print(len(params), "tensors;", params[0].size(), "holds the first layer's kernels")

image = torch.randn(1, 1, 14, 14)
scores = net(image)
print("scores", scores.shape)
net.zero_grad()
scores.backward(torch.randn(1, 4))  # any gradient of the right shape

target = torch.randn(4).view(1, -1)
criterion = nn.MSELoss()
output = net(image)
loss = criterion(output, target)
print(f"loss {loss.item():.5f}")
net.zero_grad()
print("conv_a.bias.grad after zero_grad:", net.conv_a.bias.grad)
loss.backward()
print("conv_a.bias.grad after backward:", [round(v, 5) for v in net.conv_a.bias.grad.tolist()])

optimizer = optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
for i in range(3):
    optimizer.zero_grad()
    output = net(image)
    loss = criterion(output, target)
    loss.backward()
    optimizer.step()
    print(f"sgd step {i}: loss {loss.item():.5f}")

batch = torch.randn(6, 1, 14, 14)
outputs = net(batch)
best, predicted = torch.max(outputs.data, 1)
print("predicted", predicted.tolist(), "best", [round(v, 4) for v in best.tolist()])

with tempfile.TemporaryDirectory() as folder:
    path = os.path.join(folder, "tiny.pth")
    torch.save(net.state_dict(), path)
    copy = TinyConvNet()
    copy.load_state_dict(torch.load(path, weights_only=True))
print("reloaded weights equal:", all(torch.equal(a, b) for a, b in zip(net.parameters(), copy.parameters())))
