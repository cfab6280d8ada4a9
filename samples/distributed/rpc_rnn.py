"""An RNN language model split over torch.distributed.rpc, shaped like pytorch/examples' distributed/rpc/rnn
(written here, not copied): the parameter server ("ps") holds the embedding table and the decoder, created with
`rpc.remote`; the trainer holds the LSTM and calls the two remote modules through their RRefs with `rpc_sync`.
Each step runs in a distributed autograd context: `dist_autograd.backward` reaches the server's modules, and a
`DistributedOptimizer` updates the parameters on both sides.

    gradviz run samples/distributed/rpc_rnn.py [STEPS]
"""

import os
import socket
import sys

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp
import torch.nn as nn
from torch.distributed.optim import DistributedOptimizer

VOCAB, EMBED, HIDDEN, LAYERS = 20, 6, 8, 2


class Embedding(nn.Module):
    def __init__(self):
        super().__init__()
        self.table = nn.Embedding(VOCAB, EMBED)

    def forward(self, tokens):
        return self.table(tokens)


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.out = nn.Linear(HIDDEN, VOCAB)

    def forward(self, hidden):
        return self.out(hidden)


def call(module_rref, x):
    """Runs on the module's owner: its forward, on the tensor the trainer sent."""
    return module_rref.local_value()(x)


def remote_parameters(module_rref):
    return [rpc.RRef(p) for p in module_rref.local_value().parameters()]


class SplitRNN(nn.Module):
    """The trainer's view of the model: the remote embedding, its own LSTM, the remote decoder."""

    def __init__(self, ps):
        super().__init__()
        self.embedding = rpc.remote(ps, Embedding)
        self.lstm = nn.LSTM(EMBED, HIDDEN, LAYERS, batch_first=True)
        self.decoder = rpc.remote(ps, Decoder)

    def forward(self, tokens, state):
        embedded = rpc.rpc_sync(self.embedding.owner(), call, args=(self.embedding, tokens))
        output, state = self.lstm(embedded, state)
        return rpc.rpc_sync(self.decoder.owner(), call, args=(self.decoder, output)), state

    def parameter_rrefs(self):
        own = [rpc.RRef(p) for p in self.lstm.parameters()]
        return (rpc.rpc_sync(self.embedding.owner(), remote_parameters, args=(self.embedding,)) + own
                + rpc.rpc_sync(self.decoder.owner(), remote_parameters, args=(self.decoder,)))


def detached(state):
    return tuple(s.detach() for s in state)


def train(steps):
    torch.manual_seed(0)
    model = SplitRNN("ps")
    opt = DistributedOptimizer(torch.optim.SGD, model.parameter_rrefs(), lr=0.05)
    state = (torch.zeros(LAYERS, 2, HIDDEN), torch.zeros(LAYERS, 2, HIDDEN))
    for _ in range(steps):
        tokens = torch.randint(0, VOCAB, (2, 5))
        target = torch.randint(0, VOCAB, (2 * 5,))
        with dist_autograd.context() as context_id:
            state = detached(state)
            logits, state = model(tokens, state)
            loss = nn.functional.cross_entropy(logits.reshape(-1, VOCAB), target)
            dist_autograd.backward(context_id, [loss])
            opt.step(context_id)
        print(f"loss {loss.item():.4f}")


def worker(rank, port, steps):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    rpc.init_rpc("trainer" if rank == 0 else "ps", rank=rank, world_size=2)
    if rank == 0:
        train(steps)
    rpc.shutdown()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(port, int(sys.argv[1]) if len(sys.argv) > 1 else 3), nprocs=2)
