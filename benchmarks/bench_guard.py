"""What the trace guard adds to each callback the gradviz engine makes (an op makes 1-3, a tiny step 39).

    python benchmarks/bench_guard.py [--rounds 15] [--calls 200000]

Three ways the engine could reach the same adapter method, timed in interleaved rounds (CPU time of the process):
the method itself (no guard: what the engine would pay with the guard's work pasted into the method), the guard's
callback (``gradviz.tracing.adapters.guard``, active and alone on its thread: the usual case), and a callback of
the same work forwarding ``*args, **kwargs`` (the guard's shape before it took each Observer method's parameters).
The table gives the median per call and what each adds over the method alone.
"""

import argparse
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

from gradviz.autograd.observer import Observer  # noqa: E402
from gradviz.tracing.adapters.guard import Guard  # noqa: E402


class _Builder:
    """The builder's part the guard touches."""

    def __init__(self):
        self.lock = threading.RLock()
        self.thread_ident = threading.get_ident()
        self.errors = []

    def internal_error(self, name, exc):
        self.errors.append((name, exc))


class _Adapter(Observer):
    """An adapter whose callbacks do nothing: what is left is the cost of reaching them."""

    thread_ident = threading.get_ident()

    def on_function(self, node, inputs, outputs):
        pass


def forwarding(guard, target, failed):
    """The guard's solo path, forwarding any arguments (the shape the guard had before)."""

    def callback(*args, **kwargs):
        if guard.solo:
            try:
                target(*args, **kwargs)
            except Exception as exc:
                failed("on_function", exc)
            return

    return callback


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=200_000, help="callbacks per timed block")
    args = parser.parse_args(argv)
    builder, adapter = _Builder(), _Adapter()
    guard = Guard(adapter, builder)
    guard.active = guard.solo = True
    ways = {"adapter method alone": adapter.on_function, "guard callback": guard.on_function,
            "*args forwarding callback": forwarding(guard, adapter.on_function, builder.internal_error)}
    calls = args.calls
    contenders = {}
    for name, fn in ways.items():
        def block(fn=fn):
            for _ in range(calls):
                fn(None, (), ())
        contenders[name] = block
    samples = common.run_rounds(contenders, rounds=args.rounds, warmup=1, clock=time.process_time)
    alone = common.median(samples["adapter method alone"]) / calls
    rows = []
    for name in ways:
        per_call = common.median(samples[name]) / calls
        rows.append([name, f"{per_call * 1e9:.0f} ns", f"{(per_call - alone) * 1e9:+.0f} ns",
                     f"{common.spread(samples[name]) * 100:.0f}%"])
    print(common.table(f"{args.rounds} rounds of {calls:,} calls each, interleaved (process CPU time)", rows,
                       ["way", "per call", "over the method", "spread"]))
    assert not builder.errors


if __name__ == "__main__":
    main()
