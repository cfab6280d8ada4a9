"""Workers started every way a script can: torch.multiprocessing.spawn (a DDP pair), multiprocessing with the
fork, spawn and forkserver start methods, a child that leaves with os._exit and a Python subprocess. Under
`gradviz run spawn_workers.py` the first five are traced in their own documents; the last two are listed as not
traced, at their lines."""

import multiprocessing
import os
import socket
import subprocess
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def ddp_rank(rank, world_size, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        loss = model(torch.randn(5, 4)).pow(2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    dist.destroy_process_group()


def fit(steps):
    w = torch.ones(3, requires_grad=True)
    for _ in range(steps):
        (w * 2).sum().backward()


def leave_abruptly():
    os._exit(0)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    mp.spawn(ddp_rank, args=(2, free_port()), nprocs=2)
    for method in ("fork", "spawn", "forkserver"):
        worker = multiprocessing.get_context(method).Process(target=fit, args=(2,))
        worker.start()
        worker.join()
    abrupt = multiprocessing.get_context("spawn").Process(target=leave_abruptly)
    abrupt.start()
    abrupt.join()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    x = torch.ones(2, requires_grad=True)
    (x * 5).sum().backward()
