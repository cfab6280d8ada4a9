"""What the trace guard adds to each callback the gradviz engine makes (an op makes 1-3, a tiny step 39).

    python benchmarks/bench_guard.py [--rounds 15] [--calls 200000]

Ways the engine can reach the same adapter method, timed in interleaved rounds (CPU time of the process): the
method itself; the guard's callback while the traced thread is alone (``gradviz.tracing.adapters.guard``: the
usual case, now the method itself, called by the engine inside a ``try``); the guard's callback when threads share
the trace (a closure taking the lock); and the shape the alone callback had before (a closure with the method's
own parameters, a frame between the engine and the method). The table gives the median per call and what each adds
over the method alone.
"""

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
from guard_fakes import make_guard  # noqa: E402


def framed(guard, target, failed):
    """The guard's alone callback before it was the adapter's method itself: one frame more, and its own try."""

    def on_function(node, inputs, outputs):
        if guard.solo:
            try:
                target(node, inputs, outputs)
            except Exception as exc:
                failed("on_function", exc)
            return

    return on_function


def engine_call(o, calls):
    """What the engine does per callback (function.py): the call inside a ``try`` that hands errors on."""
    for _ in range(calls):
        try:
            o.on_function(None, (), ())
        except Exception as failure:
            o.callback_failed("on_function", failure)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=200_000, help="callbacks per timed block")
    args = parser.parse_args(argv)
    guard, adapter, builder = make_guard(solo=True)
    shared, _, shared_builder = make_guard(solo=False)
    calls = args.calls

    class Framed:  # an observer whose on_function is the old alone callback
        on_function = staticmethod(framed(guard, adapter.on_function, builder.internal_error))
        callback_failed = guard.callback_failed

    ways = {"adapter method alone": adapter, "guard, thread alone (now)": guard,
            "guard, threads sharing the trace": shared, "guard, thread alone (main 80fb8e8: a frame)": Framed()}
    contenders = {name: (lambda o=o: engine_call(o, calls)) for name, o in ways.items()}
    samples = common.run_rounds(contenders, rounds=args.rounds, warmup=1, clock=time.process_time)
    alone = common.median(samples["adapter method alone"]) / calls
    rows = []
    for name in ways:
        per_call = common.median(samples[name]) / calls
        rows.append([name, f"{per_call * 1e9:.0f} ns", f"{(per_call - alone) * 1e9:+.0f} ns",
                     f"{common.spread(samples[name]) * 100:.0f}%"])
    print(common.table(f"{args.rounds} rounds of {calls:,} calls each, interleaved (process CPU time)", rows,
                       ["way", "per call", "over the method", "spread"]))
    assert not builder.errors and not shared_builder.errors


if __name__ == "__main__":
    main()
