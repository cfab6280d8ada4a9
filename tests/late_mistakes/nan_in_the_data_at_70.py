import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = torch.randn(100, 16, 4)
data[70, 3, 1] = float("nan")  # a corrupt sample in the data set
targets = torch.randn(100, 16, 1)
for step in range(100):
    opt.zero_grad()
    x = data[step]  # MARK: the batch is loaded here
    loss = ((model(x) - targets[step]) ** 2).mean()
    loss.backward()  # BACKWARD
    opt.step()
