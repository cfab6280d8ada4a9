"""Rendering speed: build_graph + to_dot + dot layout, end to end, on hand-built trace documents.

Run: python benchmarks/bench_render.py [--repeat N]. Prints the median seconds per case; the target is under 5 s
for any trace with default options, including a 10,000-node loop that reuses one input at every step.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository: its tests' synthetic documents

from gradviz.rendering import build_graph, dot_available, lay_out, to_dot  # noqa: E402
from tests.synthetic_docs import DocBuilder, chained_models_doc, loop_doc  # noqa: E402


def random_dag(n, seed=0):
    """An aperiodic DAG of ``n`` ops (nothing to fold): exercises the max_nodes cap and the layout budget."""
    import random

    rng = random.Random(seed)
    b = DocBuilder("random_dag.py")
    values = [b.leaf(f"p{i}", [4], parameter=True) for i in range(8)]
    ops = ["AddBackward", "MulBackward", "SubBackward", "DivBackward"]
    for _ in range(n):
        values.append(b.op(rng.choice(ops), [rng.choice(values[-50:]), rng.choice(values)], [4]))
    b.backward(b.op("SumBackward", [values[-1]], []))
    return b.finish()


def traced_rnn(steps=2500):
    """A real trace (gradviz.trace, not hand-built): ``h = tanh(h * w + x)`` for ``steps`` steps reusing one input
    ``x`` and one weight ``w`` at every step, then one backward — 4 ops a step, 10,000 nodes in one graph."""
    import gradviz

    with gradviz.trace() as tr:
        w = gradviz.randn(8, requires_grad=True)
        x = gradviz.randn(8)
        h = gradviz.zeros(8)
        for _ in range(steps):
            h = (h * w + x).tanh() * 1.0
        h.sum().backward()
    return tr.to_dict()


CASES = {
    "chained models (9 nodes)": lambda: chained_models_doc(),
    "loop 10,000 nodes, input reused each step": lambda: loop_doc(3333),
    "loop 10,000 nodes, new input each step": lambda: loop_doc(3333, reuse_input=False),
    "loop 700 nodes, not folded (ghosts only)": lambda: (loop_doc(233), {"fold_loops": False}),
    "random DAG 2,000 nodes": lambda: random_dag(2000),
    "random DAG 10,000 nodes": lambda: random_dag(10000),
    "traced RNN loop, 10,000 nodes, x and w reused": traced_rnn,
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if not dot_available():
        print("Graphviz dot is not installed: timing build_graph + to_dot only")
    for name, make in CASES.items():
        made = make()
        doc, options = made if isinstance(made, tuple) else (made, {})
        times, builds = [], []
        for _ in range(args.repeat):
            start = time.perf_counter()
            spec = build_graph(doc, **options)
            to_dot(spec)
            builds.append(time.perf_counter() - start)
            if dot_available():
                start = time.perf_counter()
                spec, _, _ = lay_out(doc, "svg", **options)      # build + DOT + dot -Tsvg, as render() does
                times.append(time.perf_counter() - start)
        total = f"render median {statistics.median(times):6.3f} s" if times else "render (no dot)"
        print(f"{name:45s} {total}  (build_graph+to_dot {statistics.median(builds):.3f} s, "
              f"{len(spec.nodes)} drawn nodes)")


if __name__ == "__main__":
    main()
