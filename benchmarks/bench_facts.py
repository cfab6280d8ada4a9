"""What a named fact costs on the tracer's hot path: the adapter builds one, the builder reads it back.

    python benchmarks/bench_facts.py [--rounds R] [--facts N]

An adapter hands the builder one ``SavedFact`` (11 fields) per saved tensor and one ``OutputFact`` (9 fields) per
output of every op (facts.py). Each contender builds N of each kind from local values, as an adapter does, and
reads every field back as ``SavedMemory.hold`` and ``GraphFacts.op`` do (by position for tuples, by name for a
dataclass, which cannot be unpacked). Contenders, side by side in one run (rounds in rotated order, medians of the
thread's CPU time, the figure per pair of facts):

- ``plain tuple``: a tuple display, what the adapters built before;
- ``namedtuple, class call``: ``SavedFact(a, b, ...)`` (its ``__new__`` is a Python function: one frame);
- ``namedtuple, tuple.__new__``: ``tuple.__new__(SavedFact, (a, b, ...))`` (a C call, no frame; the fields all
  given, so no default is needed);
- ``namedtuple, partial(tuple.__new__)``: the same through ``functools.partial`` (facts.py's ``saved_fact``
  and ``output_fact``);
- ``typing.NamedTuple, class call``: the same type declared with annotations;
- ``slotted dataclass``: ``@dataclass(slots=True)``, built by its ``__init__`` and read by attribute.
"""

import argparse
import functools
import sys
import time
from collections import namedtuple
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402

SAVED_FIELDS = "variable kind index shape nbytes version counter block block_bytes device storage"
OUTPUT_FIELDS = "key shape dtype nbytes requires_grad is_leaf name device handle"
SavedTuple = namedtuple("SavedTuple", SAVED_FIELDS)
OutputTuple = namedtuple("OutputTuple", OUTPUT_FIELDS)


class SavedTyped(NamedTuple):
    variable: Any
    kind: Any
    index: Any
    shape: Any
    nbytes: Any
    version: Any
    counter: Any
    block: Any
    block_bytes: Any
    device: Any
    storage: Any


class OutputTyped(NamedTuple):
    key: Any
    shape: Any
    dtype: Any
    nbytes: Any
    requires_grad: Any
    is_leaf: Any
    name: Any
    device: Any
    handle: Any


@dataclass(slots=True)
class SavedData:
    variable: Any
    kind: Any
    index: Any
    shape: Any
    nbytes: Any
    version: Any
    counter: Any
    block: Any
    block_bytes: Any
    device: Any
    storage: Any


@dataclass(slots=True)
class OutputData:
    key: Any
    shape: Any
    dtype: Any
    nbytes: Any
    requires_grad: Any
    is_leaf: Any
    name: Any
    device: Any
    handle: Any


def by_position(n, make_saved, make_output):
    """A contender whose facts are tuples of some kind: built by ``make_*`` and unpacked by position."""
    shape = (64, 128)

    def run():
        facts = []
        for i in range(n):
            facts.append((make_saved(i, "input", 0, shape, 32768, 0, 7, 9, 32768, None, 9),
                          make_output(i, shape, "float32", 32768, True, False, None, None, None)))
        total = 0
        for saved, output in facts:
            vkey, kind, index, shape_, nbytes, version, counter, block, block_bytes, _, storage = saved
            okey, oshape, dtype, onbytes, requires_grad, is_leaf, name, device, handle = output
            total += nbytes + onbytes
        return total

    return run


def literal(n):
    """The plain tuple display (no call at all), what the adapters built before the named types."""
    shape = (64, 128)

    def run():
        facts = []
        for i in range(n):
            facts.append(((i, "input", 0, shape, 32768, 0, 7, 9, 32768, None, 9),
                          (i, shape, "float32", 32768, True, False, None, None, None)))
        total = 0
        for saved, output in facts:
            vkey, kind, index, shape_, nbytes, version, counter, block, block_bytes, _, storage = saved
            okey, oshape, dtype, onbytes, requires_grad, is_leaf, name, device, handle = output
            total += nbytes + onbytes
        return total

    return run


def tuple_new(n):
    """The named tuple built by ``tuple.__new__`` over a tuple display: a C call, no Python frame."""
    shape = (64, 128)
    new = tuple.__new__

    def run():
        facts = []
        for i in range(n):
            facts.append((new(SavedTuple, (i, "input", 0, shape, 32768, 0, 7, 9, 32768, None, 9)),
                          new(OutputTuple, (i, shape, "float32", 32768, True, False, None, None, None))))
        total = 0
        for saved, output in facts:
            vkey, kind, index, shape_, nbytes, version, counter, block, block_bytes, _, storage = saved
            okey, oshape, dtype, onbytes, requires_grad, is_leaf, name, device, handle = output
            total += nbytes + onbytes
        return total

    return run


def via_partial(n):
    """``functools.partial(tuple.__new__, SavedFact)`` over a tuple display (facts.py's ``saved_fact``): C calls."""
    shape = (64, 128)
    saved_fact = functools.partial(tuple.__new__, SavedTuple)
    output_fact = functools.partial(tuple.__new__, OutputTuple)

    def run():
        facts = []
        for i in range(n):
            facts.append((saved_fact((i, "input", 0, shape, 32768, 0, 7, 9, 32768, None, 9)),
                          output_fact((i, shape, "float32", 32768, True, False, None, None, None))))
        total = 0
        for saved, output in facts:
            vkey, kind, index, shape_, nbytes, version, counter, block, block_bytes, _, storage = saved
            okey, oshape, dtype, onbytes, requires_grad, is_leaf, name, device, handle = output
            total += nbytes + onbytes
        return total

    return run


def dataclasses(n):
    """Slotted dataclasses: built by their ``__init__``, every field read by name."""
    shape = (64, 128)

    def run():
        facts = []
        for i in range(n):
            facts.append((SavedData(i, "input", 0, shape, 32768, 0, 7, 9, 32768, None, 9),
                          OutputData(i, shape, "float32", 32768, True, False, None, None, None)))
        total = 0
        for saved, output in facts:
            vkey, kind, index, shape_, nbytes = saved.variable, saved.kind, saved.index, saved.shape, saved.nbytes  # noqa: F841 (read, as the builder reads it)
            version, counter, block, block_bytes = saved.version, saved.counter, saved.block, saved.block_bytes  # noqa: F841 (read, as the builder reads it)
            storage = saved.storage  # noqa: F841 (read, as the builder reads it)
            okey, oshape, dtype, onbytes = output.key, output.shape, output.dtype, output.nbytes  # noqa: F841 (read, as the builder reads it)
            requires_grad, is_leaf, name = output.requires_grad, output.is_leaf, output.name  # noqa: F841 (read, as the builder reads it)
            device, handle = output.device, output.handle  # noqa: F841 (read, as the builder reads it)
            total += nbytes + onbytes
        return total

    return run


def contenders(n):
    return {
        "plain tuple": literal(n),
        "namedtuple, class call": by_position(n, SavedTuple, OutputTuple),
        "namedtuple, tuple.__new__": tuple_new(n),
        "namedtuple, partial(tuple.__new__)": via_partial(n),
        "typing.NamedTuple, class call": by_position(n, SavedTyped, OutputTyped),
        "slotted dataclass": dataclasses(n),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=31)
    parser.add_argument("--facts", type=int, default=2000, help="pairs of facts (saved + output) per timed call")
    args = parser.parse_args(argv)
    fns = contenders(args.facts)
    results = {name: fn() for name, fn in fns.items()}
    if len(set(results.values())) != 1:
        raise SystemExit(f"the contenders read different values: {results}")
    samples = common.run_rounds(fns, rounds=args.rounds, clock=time.thread_time)
    base = common.median(samples["plain tuple"])
    rows = []
    for name, values in samples.items():
        per = common.median(values) / args.facts
        rows.append([name, f"{per * 1e9:.0f} ns", f"{common.spread(values) * 100:.0f}%",
                     common.ratio_text(common.median(values), base)])
    print(common.machine_info())
    print(common.table(f"one SavedFact and one OutputFact built and read back ({args.facts} pairs per call, "
                       f"{args.rounds} rounds, thread CPU time)", rows, ["contender", "per pair", "IQR/median",
                                                                         "vs plain tuple"]))


if __name__ == "__main__":
    main()
