"""The workload bench_ddp.py times: an MLP training step (784-256-128-10, batch 64, float32, cross-entropy, SGD),
either one plain process (``single``; under torchrun, each process one of that) or one rank of a DDP job on gloo
(``ddp``).

    python ddp_workload.py single|ddp STEPS RESULT_PREFIX

Each process times its own steps after 10 warm-up steps, in wall time, in CPU time of its main thread
(``time.thread_time``: what the step itself computes, the tracer included, without waiting for the other rank or
for a core another program holds) and in CPU time of the whole process (``time.process_time``: the main thread
plus every other thread's, gloo's all-reduce threads among them), and writes the medians per step to
``RESULT_PREFIX-rank<r>.json``: the figures exclude start-up, the launcher and the report, which a job pays once.
"""

import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

mode, steps, prefix = sys.argv[1], int(sys.argv[2]), sys.argv[3]
torch.set_num_threads(1)
rank = int(os.environ.get("RANK", 0))  # (``single`` under torchrun: independent processes, one file each)
model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 128), torch.nn.ReLU(),
                            torch.nn.Linear(128, 10))
if mode == "ddp":
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model = torch.nn.parallel.DistributedDataParallel(model)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
torch.manual_seed(rank)
x, y = torch.randn(64, 784), torch.randint(0, 10, (64,))
wall, cpu, process = [], [], []
for step in range(steps + 10):
    start, start_cpu, start_process = time.perf_counter(), time.thread_time(), time.process_time()
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step >= 10:
        wall.append(time.perf_counter() - start)
        cpu.append(time.thread_time() - start_cpu)
        process.append(time.process_time() - start_process)
with open(f"{prefix}-rank{rank}.json", "w") as f:
    json.dump({"wall": statistics.median(wall), "cpu": statistics.median(cpu), "process": statistics.median(process),
               "steps": len(wall)}, f)
if mode == "ddp":
    dist.barrier()  # no rank tears the group down while the other still talks to it (gloo can abort then)
    dist.destroy_process_group()
