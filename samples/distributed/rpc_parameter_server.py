"""A trainer and a parameter server over torch.distributed.rpc, started with torch.multiprocessing.spawn: the
trainer holds the first and last layers, the server the middle one (its forward runs there, on an RPC thread, for
each call), and one distributed backward plus a DistributedOptimizer train all three. Under `gradviz run` the server's
forward is recorded in the server's document, and the trainer's `dist_autograd.backward` as a backward of its
local graph, SendRpcBackward and RecvRpcBackward nodes included."""

import os
import socket
import sys

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp
from torch.distributed.optim import DistributedOptimizer


class Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        return torch.tanh(self.fc(x))


def encode(encoder_rref, x):
    return encoder_rref.local_value()(x)


def parameters_of(encoder_rref):
    return [rpc.RRef(p) for p in encoder_rref.local_value().parameters()]


def train(steps):
    encoder = rpc.remote("server", Encoder)
    stem, head = torch.nn.Linear(5, 4), torch.nn.Linear(3, 1)
    local = [rpc.RRef(p) for p in [*stem.parameters(), *head.parameters()]]
    params = rpc.rpc_sync("server", parameters_of, args=(encoder,)) + local
    opt = DistributedOptimizer(torch.optim.SGD, params, lr=0.05)
    x, y = torch.randn(8, 5), torch.randn(8, 1)
    for _ in range(steps):
        with dist_autograd.context() as context_id:
            hidden = rpc.rpc_sync("server", encode, args=(encoder, stem(x)))
            loss = torch.nn.functional.mse_loss(head(hidden), y)
            dist_autograd.backward(context_id, [loss])
            opt.step(context_id)


def worker(rank, port, steps):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    rpc.init_rpc("trainer" if rank == 0 else "server", rank=rank, world_size=2)
    if rank == 0:
        train(steps)
    rpc.shutdown()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(port, int(sys.argv[1]) if len(sys.argv) > 1 else 3), nprocs=2)
