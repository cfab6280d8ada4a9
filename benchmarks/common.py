"""Timing helpers shared by the benchmarks: interleaved rounds, medians, a side-by-side table, machine facts.

Contenders run in rounds: each round times every contender once for ``inner`` calls, in an order that rotates
from round to round, so a burst of machine noise (another process, frequency changes) hits all of them alike
instead of landing on whichever ran last. Reported figures are medians over rounds of the per-call time.
"""

import gc
import os
import platform
import statistics
import sys
import time
from datetime import date


def run_rounds(contenders, rounds, inner=1, warmup=3, setup=None, teardown=None, clock=time.perf_counter):
    """Time each callable of ``contenders`` (name -> fn) and return name -> list of seconds per call.

    ``setup(name)``/``teardown(name)`` run around each contender's block of ``inner`` calls, untimed
    (the trace benchmark starts and stops its tracer there). ``clock``: wall time by default;
    ``time.thread_time`` counts only the CPU time this thread got, steadier on a machine shared with other work.
    """
    names = list(contenders)
    for name in names:  # warm caches, lazy imports, BLAS thread pools
        if setup:
            setup(name)
        for _ in range(warmup):
            contenders[name]()
        if teardown:
            teardown(name)
    samples = {name: [] for name in names}
    perf = clock
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        gc.collect()  # garbage from one contender must not be collected on another's clock
        for name in order:
            fn = contenders[name]
            if setup:
                setup(name)
            start = perf()
            for _ in range(inner):
                fn()
            elapsed = perf() - start
            if teardown:
                teardown(name)
            samples[name].append(elapsed / inner)
    return samples


def median(values):
    return statistics.median(values)


def spread(values):
    """Interquartile range relative to the median: how noisy a figure was."""
    if len(values) < 4:
        return 0.0
    q = statistics.quantiles(values, n=4)
    return (q[2] - q[0]) / statistics.median(values)


def format_time(seconds):
    if seconds >= 1e-1:
        return f"{seconds:.3f} s"
    if seconds >= 1e-4:
        return f"{seconds * 1e3:.3f} ms"
    return f"{seconds * 1e6:.2f} µs"


def table(title, rows, headers):
    """Plain-text table: ``rows`` are lists of strings, columns left-aligned except numbers."""
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(headers)]
    lines = [title, "  ".join(str(h).ljust(w) for h, w in zip(headers, widths))]
    lines.append("  ".join("-" * w for w in widths))
    for row in rows:
        cells = []
        for i, (cell, w) in enumerate(zip(row, widths)):
            cells.append(str(cell).ljust(w) if i == 0 else str(cell).rjust(w))
        lines.append("  ".join(cells))
    return "\n".join(lines)


def ratio_text(value, reference):
    return f"{value / reference:.2f}×"


def machine_info():
    """Facts that decide how a figure should be read: cores, Python, numpy and its BLAS, torch, env knobs."""
    import numpy as np

    lines = [f"date: {date.today().isoformat()}",
             f"machine: {platform.machine()} {_cpu_model()}, nproc={os.cpu_count()}",
             f"python: {sys.version.split()[0]}, numpy: {np.__version__}"]
    blas = blas_info()
    lines.append("blas: " + (", ".join(f"{b['internal_api']} {b.get('version')} kernel={b.get('architecture')} "
                                       f"threads={b['num_threads']}" for b in blas)
                             if blas else "unknown (pip install threadpoolctl to see it)"))
    knobs = {k: v for k, v in os.environ.items() if k.startswith(("OPENBLAS_", "OMP_", "MKL_"))}
    lines.append("env: " + (", ".join(f"{k}={v}" for k, v in sorted(knobs.items())) or "no OPENBLAS_/OMP_/MKL_"))
    try:
        import torch

        lines.append(f"torch: {torch.__version__}, intra-op threads now={torch.get_num_threads()}")
    except ImportError:
        lines.append("torch: not installed")
    return "\n".join(lines)


def blas_info():
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return []
    return [i for i in threadpool_info() if i.get("user_api") == "blas"]


def numpy_threads():
    """Threads numpy's BLAS uses (the count torch is set to match); os.cpu_count() if unknown."""
    blas = blas_info()
    return blas[0]["num_threads"] if blas else os.cpu_count()


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown cpu"


SETTLE_SECONDS = 0.1


def settle(_name=None):
    """Pause between contenders when BLAS/OpenMP pools have more than one thread.

    OpenBLAS's and torch's (libgomp) idle workers spin for a while after each parallel region; with two pools
    on two cores, whichever contender runs next would pay for the other's spinning. The pause is untimed.
    """
    time.sleep(SETTLE_SECONDS)


class matched_threads:
    """Give numpy's BLAS and torch the same thread count for the block; yields a line that says what was set."""

    def __init__(self, threads):
        self.threads = threads
        self._limits = None
        self._torch_before = None

    def __enter__(self):
        before = numpy_threads()
        try:
            from threadpoolctl import threadpool_limits
        except ImportError:
            threadpool_limits = None
        if threadpool_limits is not None:
            self._limits = threadpool_limits(self.threads, user_api="blas")
            numpy_now = self.threads
        else:
            numpy_now = before  # cannot change it without threadpoolctl: match torch to it instead
        note = f"threads: numpy BLAS {numpy_now} (was {before})"
        try:
            import torch
        except ImportError:
            return note + ", torch not installed"
        self._torch_before = torch.get_num_threads()
        torch.set_num_threads(numpy_now)
        return note + f", torch intra-op {numpy_now} (torch's default here: {self._torch_before})"

    def __exit__(self, *exc):
        if self._limits is not None:
            self._limits.restore_original_limits()
        if self._torch_before is not None:
            import torch

            torch.set_num_threads(self._torch_before)
        return False
