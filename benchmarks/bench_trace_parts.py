"""Where the tracing cost goes: the engine's observer dispatch, the gradviz adapter, the trace builder.

    python benchmarks/bench_trace_parts.py [--quick] [--steps K] [--rounds R]

For the MLP step and the tiny step of ``bench_trace.py``, interleaved in every round (medians of CPU time per
step, ``time.thread_time``: steady on a shared machine):

- ``untraced``;
- ``no-op observer``: an ``Observer`` whose callbacks do nothing is attached, so the engine takes its observed
  paths (module calls through ``_observed_call``, ``quiet()`` around the optimizer) and calls it: the floor of
  any observer;
- ``adapter, null builder``: ``gradviz.trace()`` with a builder that only remembers the keys the adapter asks
  about (the adapter's frame lookups, keys, weak references, facts, NaN/Inf checks and norms, nothing recorded);
- ``trace``: the real tracer.

The differences between rows are what each layer costs (issue 7's targets: MLP traced at most 1.25x untraced,
tiny at most 2x).
"""

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_trace  # noqa: E402
import common  # noqa: E402
import mlp  # noqa: E402


class _Key:
    """What the adapter reads back from the builder's live tables: an id and its own handle."""

    __slots__ = ("id", "handle", "name", "accumulator", "origin", "source")

    def __init__(self, handle=None):
        self.id = 0
        self.handle = handle
        self.name = self.accumulator = self.origin = self.source = None


def null_builder_class():
    """A TraceBuilder that records nothing: it only keeps the keys of live objects (the adapter looks them up to
    decide whether to report an object first) and the module stack."""
    from gradviz.tracing.builder import TraceBuilder

    class NullBuilder(TraceBuilder):
        def variable(self, key, origin, *args, handle=None, **kwargs):
            rec = _Key(args[13] if len(args) > 13 else handle)
            self.live_variables[key] = rec
            return rec

        def op(self, key, op, class_name, custom, edges, input_variables, outputs, saved, location, meta=None,
               nonfinite=False, lasti=-1, handle=None):
            for out in outputs:
                self.live_variables[out[0]] = _Key(out[8])
            self.live_nodes[key] = _Key(handle)

        def external_node(self, key, *args, handle=None, **kwargs):
            self.live_nodes[key] = _Key(handle)

        def variable_died(self, key, handle=None):
            self.live_variables.pop(key, None)

        def node_died(self, key, handle=None):
            self.live_nodes.pop(key, None)

        def module_enter(self, key, path, class_name):
            self.module_stack = self.module_stack + (path,)

        def module_exit(self, key):
            self.module_stack = self.module_stack[:-1]

        def backward_begin(self, *args, **kwargs):
            self.backward = {"location": None, "id": 0}

        def backward_end(self, error=None):
            self.backward = None

        def cut(self, *args, **kwargs):
            return 0

        def _nothing(self, *args, **kwargs):
            return None

        (backward_step, accumulate, buffers_freed, optimizer, name_variables, variable_state, parameter_names,
         node_inputs, node_saved, inplace, parameter_update, hook, grad_read, grad_write, unrecorded_op,
         wrapped, stop) = (_nothing,) * 17

    return NullBuilder


def contenders(steps):
    import gradviz
    from gradviz.autograd import observer
    from gradviz.tracing import recorder

    null = null_builder_class()
    real = recorder.TraceBuilder
    nop = observer.Observer()
    x, y = mlp.make_data()
    steps_of = {"MLP": mlp.gradviz_nn_step(mlp.make_params(), x, y), "tiny": bench_trace.tiny_step()}
    fns = {}
    for name, step in steps_of.items():
        def untraced(step=step):
            for _ in range(steps):
                step()

        def observed(step=step):
            observer.attach(nop)
            try:
                for _ in range(steps):
                    step()
            finally:
                observer.detach(nop)

        def adapter_only(step=step):
            recorder.TraceBuilder = null
            try:
                with gradviz.trace():
                    for _ in range(steps):
                        step()
            finally:
                recorder.TraceBuilder = real

        def traced(step=step):
            with gradviz.trace():
                for _ in range(steps):
                    step()

        fns.update({f"{name} untraced": untraced, f"{name} no-op observer": observed,
                    f"{name} adapter, null builder": adapter_only, f"{name} trace": traced})
    return fns


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="few rounds: a smoke run, not a measurement")
    parser.add_argument("--steps", type=int, default=20, help="training steps per timed loop (default 20)")
    parser.add_argument("--rounds", type=int, default=25)
    args = parser.parse_args(argv)
    rounds = 4 if args.quick else args.rounds
    with common.matched_threads(1) as note:
        print(note)
        print(common.machine_info())
        print()
        samples = common.run_rounds(contenders(args.steps), rounds=rounds, inner=1, warmup=2, clock=time.thread_time)
    for model in ("MLP", "tiny"):
        base = common.median(samples[f"{model} untraced"]) / args.steps
        rows = []
        for name, s in samples.items():
            if name.startswith(model + " "):
                per_step = common.median(s) / args.steps
                rows.append([name[len(model) + 1:], common.format_time(per_step), f"±{common.spread(s) * 50:.0f}%",
                             common.ratio_text(per_step, base), common.format_time(per_step - base)])
        print(common.table(f"{model} step, loops of {args.steps} steps, {rounds} rounds: median CPU time per step",
                           rows, ["contender", "per step", "iqr/2", "vs untraced", "over untraced"]))


if __name__ == "__main__":
    main()
