"""Each rank starts processes of its own: two DataLoader workers, a child that ends with os._exit, a traced
child, and a Python interpreter through subprocess. `gradviz torchrun --standalone --nproc-per-node 2
ddp_rank_children.py` traces the one it can and lists the others, each at its line, with the ranks that started
them."""

import multiprocessing as mp
import os
import subprocess
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset


def quits_abruptly():
    os._exit(0)


def trains_a_little(rank):
    w = torch.ones(3, requires_grad=True)
    (w * rank).sum().backward()


if __name__ == "__main__":
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    data = TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
    loader = DataLoader(data, batch_size=8, num_workers=2)
    model = DDP(torch.nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for x, y in loader:
        loss = (model(x) - y).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    ctx = mp.get_context("spawn")
    abrupt = ctx.Process(target=quits_abruptly)
    abrupt.start()
    abrupt.join()
    helper = ctx.Process(target=trains_a_little, args=(rank,))
    helper.start()
    helper.join()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    dist.destroy_process_group()
