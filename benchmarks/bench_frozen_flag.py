"""What the frozen-parameter watch's patch of ``nn.Parameter.requires_grad`` costs an optimizer step.

    python benchmarks/bench_frozen_flag.py [--turns T] [--steps S]

``tracing/adapters/frozen_watch.py`` patches the attribute on ``nn.Parameter`` while a trace is attached, to see
``p.requires_grad = False`` at its line on any iteration. Every read of ``p.requires_grad`` then goes through
that patch. The workload: a model of 200 parameters (100 ``nn.Linear(16, 16)``), and a step that reads
``p.requires_grad`` once per parameter (``[p for p in params if p.requires_grad]``, as training loops and
``filter(lambda p: p.requires_grad, ...)`` do) and then runs ``SGD.step()`` with momentum. Three variants,
taken in turns in this one process (interleaved, so the machine's load falls on all of them alike):

- ``none``: no patch (PyTorch as it is);
- ``descriptor``: the patch as it was, a Python data descriptor whose ``__get__`` runs a Python frame per read;
- ``property``: the patch now (``frozen_watch.flag``), a ``property`` whose getter is the tensor's own C getter.

Printed: the CPU time of S steps per turn (``time.process_time``; medians over T turns and the ratio to ``none``),
the Python function calls per step under cProfile (deterministic: what each read adds), and the reads alone
(the list comprehension without the step, CPU per read).
"""

import argparse
import cProfile
import pstats
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


class Descriptor:
    """The patch as it was before (frozen_watch's ``_Flag``): a Python ``__get__`` per read."""

    def __init__(self, base, note):
        self.base = base
        self.note = note

    def __get__(self, obj, cls=None):
        return self if obj is None else self.base.__get__(obj, cls)

    def __set__(self, obj, value):
        self.base.__set__(obj, value)
        self.note(obj, value)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=7)
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()

    import torch

    from gradviz.tracing.adapters.frozen_watch import flag

    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(16, 16) for _ in range(100)])
    params = list(model.parameters())
    assert len(params) == 200
    for p in params:
        p.grad = torch.randn_like(p)
    optimizer = torch.optim.SGD(params, lr=1e-4, momentum=0.9)
    base = torch._C.TensorBase.__dict__["requires_grad"]
    Parameter = torch.nn.Parameter

    def noted(param, value):
        pass

    variants = {"none": None, "descriptor": Descriptor(base, noted), "property": flag(base, noted)}

    def install(patch):
        if "requires_grad" in Parameter.__dict__:
            delattr(Parameter, "requires_grad")
        if patch is not None:
            Parameter.requires_grad = patch

    def step():
        trained = [p for p in params if p.requires_grad]
        optimizer.step()
        return trained

    def reads():
        return [p for p in params if p.requires_grad]

    times = {name: [] for name in variants}
    read_times = {name: [] for name in variants}
    try:
        for patch in variants.values():  # a warm-up turn each, and the patch checked to read right
            install(patch)
            assert len(step()) == 200 and params[0].requires_grad is True
        for _ in range(args.turns):
            for name, patch in variants.items():
                install(patch)
                start = time.process_time()
                for _ in range(args.steps):
                    step()
                times[name].append(time.process_time() - start)
                start = time.process_time()
                for _ in range(args.steps):
                    reads()
                read_times[name].append(time.process_time() - start)
        calls = {}
        for name, patch in variants.items():
            install(patch)
            profile = cProfile.Profile()
            profile.enable()
            for _ in range(10):
                step()
            profile.disable()
            calls[name] = pstats.Stats(profile).total_calls / 10
    finally:
        install(None)

    base_median = statistics.median(times["none"])
    base_reads = statistics.median(read_times["none"])
    print(f"{args.steps} steps of 200 parameters (one requires_grad read each + SGD momentum), {args.turns} turns")
    for name in variants:
        median = statistics.median(times[name])
        read = statistics.median(read_times[name])
        print(f"  {name:<11} step CPU {median:.3f} s  x{median / base_median:.2f} of none   "
              f"{calls[name]:.0f} Python calls/step   the reads alone {read * 1e6 / args.steps / 200:.3f} us/read "
              f"x{read / base_reads:.2f}")


if __name__ == "__main__":
    main()
