import torch
import torch.multiprocessing as mp
import torch.nn as nn


def worker(rank):
    torch.manual_seed(rank)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(16, 4), torch.randn(16, 1)
    for _ in range(20):
        opt.zero_grad()
        h = model[0](x)
        loss = ((model[2](model[1](h)) - y) ** 2).mean()
        loss.backward()
        opt.step()
    print("rank", rank, "h.grad", h.grad)  # MARK


if __name__ == "__main__":
    mp.spawn(worker, nprocs=2)
