"""Cost of tracing real PyTorch: untraced, PyTorch's anomaly mode, and ``gradviz.trace(engine="torch")``.

    python benchmarks/bench_torch.py [--quick] [--steps K] [--threads N] [--cpu] [--floor]

Two workloads, each timed with the three contenders interleaved in one run (see common.py):

- the MLP training step (784-256-128-10, batch 64, float32, cross-entropy, SGD), in loops of K steps;
- a 2,000-op elementwise chain (mul, add, tanh on a (4,) float32 tensor), forward and backward.

Anomaly mode is switched on and off around its loop (``torch.autograd.set_detect_anomaly``); the trace is started
and stopped around its loop (on the clock); a fourth contender also builds the trace document with every
diagnostic, as ``gradviz run`` does once at the end of a script; a fifth traces with ``exact_memory=True``
(saved tensors seen through saved-tensor hooks, docs/torch-backend.md).
``--floor`` adds three contenders that record nothing, to show what any observer built this way pays before it
records a fact: a bare ``TorchFunctionMode`` that only calls through; that mode tagging each new node
(``node.metadata``) and registering a backward prehook that does nothing; and that, plus the global module
forward pre/post hooks and the optimizer step hook that gradviz's adapter registers, each doing nothing (all
with the collector's view frozen while they run, as gradviz's adapter does).
``--cpu`` times CPU time of the calling thread (``time.thread_time``) instead of wall time: steadier on a shared
machine, and the same thing with one intra-op thread (the default), where torch computes on the calling thread.
Targets (issue 7): below anomaly mode on both; the MLP step at most 1.3x untraced; the chain at most 3x.
"""

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402
import mlp  # noqa: E402

CHAIN_LENGTH = 2000


def mlp_loop(steps):
    x, y = mlp.make_data()
    params = mlp.make_params()
    step = mlp.torch_step(params, x, y)

    def loop():
        for _ in range(steps):
            step()

    return loop


def chain_loop(n=CHAIN_LENGTH):
    import torch

    x = torch.randn(4, requires_grad=True)
    c = torch.full((4,), 0.9)

    def loop():
        y = x
        for i in range(n):
            k = i % 3
            y = y * c if k == 0 else (y + c if k == 1 else y.tanh())
        y.sum().backward()
        x.grad = None

    return loop


def floor_modes():
    """Two observers that record nothing: the mode alone, and the mode tagging nodes with a prehook."""
    import torch
    from torch.overrides import TorchFunctionMode

    class CallThrough(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    class Tag:
        __slots__ = ("id", "__weakref__")

        def __init__(self, key):
            self.id = key

        def __call__(self, grad_outputs):
            return None

    class TagNodes(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            result = func(*args, **(kwargs or {}))
            if type(result) is torch.Tensor:
                fn = result.grad_fn
                if fn is not None and "floor" not in fn.metadata:
                    tag = fn.metadata["floor"] = Tag(id(fn))
                    fn.register_prehook(tag)
            return result

    return CallThrough, TagNodes


def contenders(work, floor=False):
    import torch

    import gradviz

    untraced, anomalous, traced, exact = work(), work(), work(), work()

    documented = work()

    def anomaly():
        torch.autograd.set_detect_anomaly(True)
        try:
            anomalous()
        finally:
            torch.autograd.set_detect_anomaly(False)

    def trace():
        with gradviz.trace(engine="torch"):
            traced()

    def trace_exact_memory():
        with gradviz.trace(engine="torch", exact_memory=True):
            exact()

    def trace_and_document():
        with gradviz.trace(engine="torch") as tr:
            documented()
        tr.to_dict()

    found = {"untraced": untraced, "anomaly mode": anomaly, "gradviz.trace(engine='torch')": trace,
             "trace + document": trace_and_document, "trace(exact_memory=True)": trace_exact_memory}
    if floor:
        call_through, tag_nodes = floor_modes()
        found["floor: mode calling through"] = _under(call_through, work())
        found["floor: mode + node tags + prehooks"] = _under(tag_nodes, work())
        found["floor: ... + module/optimizer hooks"] = _under(tag_nodes, work(), global_hooks=True)
    return found


def _under(mode_class, loop, global_hooks=False):
    """``loop`` under the mode, the collector's view frozen meanwhile as gradviz's adapter does (or the
    collections walking torch's objects would be most of what is measured); with ``global_hooks``, also under
    no-op global module forward pre/post hooks and an optimizer step post hook."""
    import gc

    from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook
    from torch.optim.optimizer import register_optimizer_step_post_hook

    def run():
        gc.freeze()
        handles = [register_module_forward_pre_hook(lambda m, a: None),
                   register_module_forward_hook(lambda m, a, o: None),
                   register_optimizer_step_post_hook(lambda o, a, k: None)] if global_hooks else []
        try:
            with mode_class():
                loop()
        finally:
            for h in handles:
                h.remove()
            gc.unfreeze()

    return run


def report(title, samples, per):
    base = common.median(samples["untraced"]) / per
    rows = []
    for name, s in samples.items():
        value = common.median(s) / per
        rows.append([name, common.format_time(value), f"±{common.spread(s) * 50:.0f}%",
                     common.ratio_text(value, base)])
    print(common.table(title, rows, ["contender", "per step", "iqr/2", "vs untraced"]))
    print()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="few rounds: a smoke run, not a measurement")
    parser.add_argument("--steps", type=int, default=20, help="MLP training steps per timed loop (default 20)")
    parser.add_argument("--threads", type=int, default=1, help="BLAS / torch intra-op threads (default 1)")
    parser.add_argument("--cpu", action="store_true",
                        help="time the calling thread's CPU time (steadier on a shared machine; for --threads 1)")
    parser.add_argument("--floor", action="store_true",
                        help="also time two observers that record nothing (the floor of this design)")
    args = parser.parse_args(argv)
    clock = time.thread_time if args.cpu else time.perf_counter
    rounds = 4 if args.quick else 21
    with common.matched_threads(args.threads) as note:
        import torch

        torch.set_num_threads(args.threads)  # without threadpoolctl, matched_threads follows numpy's count
        print(note + f"; torch intra-op set to {args.threads}")
        print(common.machine_info())
        print()
        samples = common.run_rounds(contenders(lambda: mlp_loop(args.steps), args.floor), rounds=rounds, warmup=2,
                                    clock=clock)
        report(f"MLP training step (torch.nn + SGD), loops of {args.steps} steps, {rounds} rounds: median "
               f"{'CPU ' if args.cpu else ''}time per step",
               samples, args.steps)
        samples = common.run_rounds(contenders(chain_loop, args.floor), rounds=rounds, warmup=2, clock=clock)
        report(f"{CHAIN_LENGTH}-op elementwise chain, forward + backward, {rounds} rounds: median "
               f"{'CPU ' if args.cpu else ''}time per chain",
               samples, 1)


if __name__ == "__main__":
    main()
