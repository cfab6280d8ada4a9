"""The trace builder alone: record the facts an adapter sends, replay them on fresh builders, time the replay.

    python benchmarks/bench_builder.py [--rounds R] [--kinds] [WORKLOAD ...]

Workloads: ``tiny`` (200 steps of bench_trace's tiny step), ``mlp`` (50 MLP steps), ``torch-chain`` (the
2,000-op chain of bench_torch.py, traced on PyTorch) and ``chain`` (the same chain on gradviz's engine). Each is
traced once with a builder that logs every fact method call (its arguments as given, and the adapters' reads of
``saved_counters`` / ``saved_storages``, which fill those indexes); the log is then replayed on a fresh
``TraceBuilder`` R times (CPU time of the calling thread, collector off, medians), and the document is built
from each replay (``build_document`` without diagnostics, collector on). Before timing, the replay's document
is checked against the traced one: the replay is the same trace. ``--kinds`` also times each fact method
(``perf_counter_ns`` around each call, the timer's own cost taken off; the sum is above the plain replay's).

What it leaves out: the adapter and the engine (bench_trace_parts.py has them), and the cost of the calls'
dispatch (the replay calls ``getattr(builder, name)(*args, **kwargs)``, about what an adapter's call costs).
Instruction counts are steadier than times on a shared machine: run it under
``valgrind --tool=cachegrind --cache-sim=no`` with two values of ``--rounds`` and divide the difference.
"""

import argparse
import gc
import inspect
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402

_NOT_FACTS = {"thread", "stats", "document"}  # read-only helpers and the end: not replayed


def recording_builder():
    """A TraceBuilder subclass whose fact methods log their calls (the outermost only: a fact's own calls to
    other fact methods are part of it), and the log."""
    from gradviz.tracing.builder import TraceBuilder

    log = []
    depth = [0]

    def wrap(name, fn):
        always = name in ("variable_handle_died", "node_handle_died")  # weak reference callbacks, any time

        def logged(self, *args, **kwargs):
            if depth[0] == 0 or always:
                log.append((name, args, kwargs))
            depth[0] += 1
            try:
                return fn(self, *args, **kwargs)
            finally:
                depth[0] -= 1

        return logged

    namespace = {}
    for name, fn in inspect.getmembers(TraceBuilder, inspect.isfunction):
        if not name.startswith("_") and name not in _NOT_FACTS:
            namespace[name] = wrap(name, fn)
    for name in ("saved_counters", "saved_storages"):
        prop = getattr(TraceBuilder, name)

        def read(self, _name=name, _get=prop.fget):
            if depth[0] == 0:
                log.append(("__get__", (_name,), {}))
            return _get(self)

        namespace[name] = property(read)

    def __setattr__(self, name, value):  # the recorder sets ``stopped`` and ``script``
        if depth[0] == 0 and name in ("stopped", "script"):
            log.append(("__set__", (name, value), {}))
        object.__setattr__(self, name, value)

    namespace["__setattr__"] = __setattr__
    return type("RecordingBuilder", (TraceBuilder,), namespace), log


def replay(log, window=3):
    from gradviz.tracing.builder import TraceBuilder

    b = TraceBuilder(window)
    for name, args, kwargs in log:
        apply_fact(b, name, args, kwargs)
    return b


class _Noop:
    def fact(self):
        pass


_NOOP = _Noop()


def _timed_noop():
    t = time.perf_counter_ns()
    apply_fact(_NOOP, "fact", (), {})
    return time.perf_counter_ns() - t


def apply_fact(b, name, args, kwargs):
    """One recorded fact on builder ``b``: a method call, or an attribute read or write."""
    if name == "__get__":
        getattr(b, args[0])
    elif name == "__set__":
        setattr(b, *args)
    else:
        getattr(b, name)(*args, **kwargs)


def workload(name):
    """(a function that runs it traced and returns the Trace, its unit, how many units)."""
    import gradviz

    if name == "tiny":
        import bench_trace

        step = bench_trace.tiny_step()
        steps, unit = 200, "step"
    elif name == "mlp":
        import mlp

        x, y = mlp.make_data()
        step = mlp.gradviz_nn_step(mlp.make_params(), x, y)
        steps, unit = 50, "step"
    elif name == "torch-chain":
        import bench_torch
        import torch

        torch.manual_seed(0)
        loop = bench_torch.chain_loop()

        def run():
            with gradviz.trace(engine="torch") as tr:
                loop()
            return tr

        return run, "op", bench_torch.CHAIN_LENGTH
    elif name == "chain":
        gradviz.manual_seed(0)
        x = gradviz.randn(4, requires_grad=True)
        c = gradviz.full((4,), 0.9)

        def run():
            with gradviz.trace() as tr:
                y = x
                for i in range(2000):
                    k = i % 3
                    y = y * c if k == 0 else (y + c if k == 1 else y.tanh())
                y.sum().backward()
            return tr

        return run, "op", 2000
    else:
        raise SystemExit(f"unknown workload {name!r}")

    def run_steps():
        with gradviz.trace() as tr:
            for _ in range(steps):
                step()
        return tr

    return run_steps, unit, steps


def record(run):
    import gradviz.tracing.recorder as recorder

    cls, log = recording_builder()
    original = recorder.TraceBuilder
    recorder.TraceBuilder = cls
    try:
        tr = run()
    finally:
        recorder.TraceBuilder = original
    return tr, log


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workloads", nargs="*", default=["tiny", "mlp", "torch-chain", "chain"])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--kinds", action="store_true", help="time each fact method too")
    args = parser.parse_args(argv)
    from gradviz.tracing.document import build_document

    print(common.machine_info())
    print()
    rows = []
    for name in args.workloads:
        try:
            run, unit, count = workload(name)
        except ImportError as exc:
            print(f"{name}: skipped ({exc})")
            continue
        tr, log = record(run)
        facts = [e for e in log if e[0] != "document"]
        want = json.dumps(build_document(tr.builder, with_diagnostics=False), sort_keys=True, default=str)
        got = json.dumps(build_document(replay(facts), with_diagnostics=False), sort_keys=True, default=str)
        if got != want:
            raise SystemExit(f"{name}: the replay's document differs from the trace's")
        times, docs = [], []
        for _ in range(args.rounds):
            gc.collect()
            gc.disable()
            t = time.thread_time_ns()
            b = replay(facts)
            t1 = time.thread_time_ns()
            gc.enable()
            build_document(b, with_diagnostics=False)
            docs.append(time.thread_time_ns() - t1)
            times.append(t1 - t)
        rows.append([name, f"{len(facts)}", f"{statistics.median(times) / count / 1e3:.2f} µs/{unit}",
                     f"±{common.spread(times) * 50:.0f}%", f"{statistics.median(docs) / 1e6:.2f} ms",
                     f"±{common.spread(docs) * 50:.0f}%"])
        if args.kinds:
            overhead = min(_timed_noop() for _ in range(10000))  # the clock and apply_fact's own call
            kinds = {}
            from gradviz.tracing.builder import TraceBuilder

            for _ in range(5):
                b = TraceBuilder(3)
                gc.collect()
                gc.disable()
                for fact, fargs, kwargs in facts:
                    t = time.perf_counter_ns()
                    apply_fact(b, fact, fargs, kwargs)
                    kinds.setdefault(fact, []).append(time.perf_counter_ns() - t - overhead)
                gc.enable()
            print(f"{name}, per fact method (5 replays):")
            per_kind = sorted(((sum(v) / 5, k, len(v) // 5) for k, v in kinds.items()), reverse=True)
            for total, fact, calls in per_kind[:12]:
                print(f"    {fact:22s} {total / count / 1e3:7.2f} µs/{unit}  "
                      f"{total / calls / 1e3:6.2f} µs a call  ×{calls}")
    print(common.table(f"The builder alone: replayed facts ({args.rounds} rounds, CPU time, medians)", rows,
                       ["workload", "facts", "replay", "iqr/2", "document", "iqr/2"]))


if __name__ == "__main__":
    main()
