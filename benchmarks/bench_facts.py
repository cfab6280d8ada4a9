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


SAVED_VALUES = 'i, "input", 0, shape, 32768, 0, 7, 9, 32768, None, 9'
OUTPUT_VALUES = 'i, shape, "float32", 32768, True, False, None, None, None'
BY_POSITION = """\
            vkey, kind, index, shape_, nbytes, version, counter, block, block_bytes, _, storage = saved
            okey, oshape, dtype, onbytes, requires_grad, is_leaf, name, device, handle = output"""
BY_NAME = """\
            vkey, kind, index, shape_, nbytes = saved.variable, saved.kind, saved.index, saved.shape, saved.nbytes
            version, counter, block, block_bytes = saved.version, saved.counter, saved.block, saved.block_bytes
            storage = saved.storage
            okey, oshape, dtype, onbytes = output.key, output.shape, output.dtype, output.nbytes
            requires_grad, is_leaf, name = output.requires_grad, output.is_leaf, output.name
            device, handle = output.device, output.handle"""

# contender -> (how a SavedFact is built, how an OutputFact is built, how both are read back); ``{}`` stands for
# the fact's values. Each row becomes the one loop below, written out in its own function, so that a contender
# pays for its own construction inline (a tuple display costs no call at all) and for nothing else.
CONTENDERS = {
    "plain tuple": ("({})", "({})", BY_POSITION),
    "namedtuple, class call": ("SavedTuple({})", "OutputTuple({})", BY_POSITION),
    "namedtuple, tuple.__new__": ("new(SavedTuple, ({}))", "new(OutputTuple, ({}))", BY_POSITION),
    "namedtuple, partial(tuple.__new__)": ("saved_fact(({}))", "output_fact(({}))", BY_POSITION),
    "typing.NamedTuple, class call": ("SavedTyped({})", "OutputTyped({})", BY_POSITION),
    "slotted dataclass": ("SavedData({})", "OutputData({})", BY_NAME),
}

LOOP = """\
def run():
    facts = []
    for i in range(n):
        facts.append(({saved}, {output}))
    total = 0
    for saved, output in facts:
{read}
        total += nbytes + onbytes
    return total
"""

NAMES = {"SavedTuple": SavedTuple, "OutputTuple": OutputTuple, "SavedTyped": SavedTyped, "OutputTyped": OutputTyped,
         "SavedData": SavedData, "OutputData": OutputData, "new": tuple.__new__,
         "saved_fact": functools.partial(tuple.__new__, SavedTuple),
         "output_fact": functools.partial(tuple.__new__, OutputTuple)}


def contender(n, saved, output, read):
    """One contender's timed call: build ``n`` pairs of facts from local values, as an adapter does, and read
    every field back, as the builder does."""
    source = LOOP.format(saved=saved.format(SAVED_VALUES), output=output.format(OUTPUT_VALUES),
                         read=read.replace("            ", "        "))
    scope = dict(NAMES, n=n, shape=(64, 128))
    exec(compile(source, f"<contender {saved}>", "exec"), scope)
    return scope["run"]


def contenders(n):
    return {name: contender(n, *how) for name, how in CONTENDERS.items()}


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
