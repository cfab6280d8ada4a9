"""Two workers of torch.distributed.rpc on localhost, started with torch.multiprocessing.spawn: worker 0 trains a
weight scaled by a value worker 1 computes on request. Under `gradviz run rpc_workers.py` both workers are traced
in their own documents; the calls worker 1 serves run on RPC threads, under worker 1's trace."""

import os
import socket

import torch
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp


def remote_scale(x):
    return x.norm() + 1.0


def worker(rank, world_size, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=world_size)
    if rank == 0:
        w = torch.randn(3, requires_grad=True)
        opt = torch.optim.SGD([w], lr=0.1)
        for _ in range(3):
            scale = rpc.rpc_sync("worker1", remote_scale, args=(torch.ones(3),))
            loss = (w * scale).pow(2).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
    rpc.shutdown()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(2, port), nprocs=2)
