"""Engine speed: an MLP training step against hand-written numpy and PyTorch, and the per-op overhead.

    python benchmarks/bench_engine.py [--quick]

Prints, side by side, the median time per MLP step (784-256-128-10, batch 64, float32, cross-entropy, SGD) of
gradviz, the same step in numpy with hand-written gradients (the floor) and PyTorch eager (when installed),
and the per-op cost of a 2,000-op chain of small elementwise ops (forward + backward). Targets (issue 2):
the MLP step within 1.3× of numpy; per-op overhead at most PyTorch eager's.
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402
import mlp  # noqa: E402
import numpy as np  # noqa: E402

CHAIN_LENGTH = 2000


def have_torch():
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


# ----- the MLP step ----------------------------------------------------------------------------------------
def mlp_contenders():
    x, y = mlp.make_data()
    params = mlp.make_params()
    makers = {"numpy (hand-written)": mlp.numpy_step, "gradviz (ops)": mlp.gradviz_ops_step}
    if mlp.gradviz_nn_available():
        makers["gradviz (nn+optim)"] = mlp.gradviz_nn_step
    if have_torch():
        makers["pytorch eager"] = mlp.torch_step
    agreement = mlp.check_agreement({n: make(params, x, y) for n, make in makers.items()})
    return {n: make(params, x, y) for n, make in makers.items()}, agreement


def bench_mlp(rounds, inner, settle):
    contenders, agreement = mlp_contenders()
    samples = common.run_rounds(contenders, rounds=rounds, inner=inner, warmup=5, setup=settle)
    floor = common.median(samples["numpy (hand-written)"])
    torch_med = common.median(samples["pytorch eager"]) if "pytorch eager" in samples else None
    rows = []
    for name, s in samples.items():
        med = common.median(s)
        rows.append([name, common.format_time(med), f"±{common.spread(s) * 50:.0f}%",
                     common.ratio_text(med, floor), common.ratio_text(med, torch_med) if torch_med else "-"])
    title = (f"MLP training step 784-256-128-10, batch {mlp.BATCH}, float32, cross-entropy, SGD lr={mlp.LR} "
             f"({rounds} rounds × {inner} steps, median per step)")
    out = common.table(title, rows, ["contender", "median", "iqr/2", "vs numpy", "vs torch"])
    checks = ", ".join(f"{n}: |Δloss|={dl:.1e} |Δparam|={dp:.1e}" for n, dl, dp in agreement)
    return out + f"\nagreement with numpy after 2 steps: {checks}", samples


# ----- per-op overhead -------------------------------------------------------------------------------------
def _chain_pair(x, c, n):
    """The same chain for any framework with PyTorch's API: (forward+backward, forward only)."""

    def forward():
        y = x
        for i in range(n):
            k = i % 3
            y = y * c if k == 0 else (y + c if k == 1 else y.tanh())
        return y

    def forward_backward():
        forward().sum().backward()
        x.grad = None

    return forward_backward, forward


def chain_contenders(n):
    """Each contender runs n ops alternating mul, add, tanh on a (4,) float32 tensor, then backward."""
    rng = np.random.default_rng(2)
    x0 = rng.standard_normal(4).astype(np.float32)
    c0 = np.full(4, 0.9, dtype=np.float32)
    contenders = {}

    import gradviz

    contenders["gradviz fwd+bwd"], contenders["gradviz fwd only"] = _chain_pair(
        gradviz.tensor(x0, requires_grad=True), gradviz.tensor(c0), n)
    if have_torch():
        import torch

        contenders["pytorch fwd+bwd"], contenders["pytorch fwd only"] = _chain_pair(
            torch.from_numpy(x0.copy()).requires_grad_(True), torch.from_numpy(c0), n)

    def numpy_chain():
        # The floor: the same ufuncs, a Python loop, backward written by hand.
        y = x0
        saved = []
        for i in range(n):
            k = i % 3
            if k == 0:
                y = y * c0
            elif k == 1:
                y = y + c0
            else:
                y = np.tanh(y)
                saved.append(y)
        g = np.ones_like(y)
        for i in range(n - 1, -1, -1):
            k = i % 3
            if k == 0:
                g = g * c0
            elif k == 2:
                t = saved.pop()
                g = g * (1 - t * t)
        return g

    contenders["numpy fwd+bwd (by hand)"] = numpy_chain
    return contenders


def bench_chain(rounds):
    contenders = chain_contenders(CHAIN_LENGTH)
    samples = common.run_rounds(contenders, rounds=rounds, inner=1, warmup=3)
    per_op = {n: common.median(s) / CHAIN_LENGTH for n, s in samples.items()}
    ref = per_op.get("pytorch fwd+bwd")
    ref_fwd = per_op.get("pytorch fwd only")
    rows = []
    for name, us in per_op.items():
        against = ref_fwd if "fwd only" in name else ref
        rows.append([name, f"{us * 1e6:.2f} µs", f"±{common.spread(samples[name]) * 50:.0f}%",
                     common.ratio_text(us, against) if against else "-"])
    title = (f"Per-op overhead: chain of {CHAIN_LENGTH} ops (mul, add, tanh) on a (4,) float32 tensor "
             f"({rounds} rounds, median µs per op)")
    return common.table(title, rows, ["contender", "per op", "iqr/2", "vs torch"]), samples


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="few rounds: a smoke run, not a measurement")
    parser.add_argument("--threads", type=int, default=1,
                        help="BLAS threads for numpy (and so gradviz) and intra-op threads for torch (default 1)")
    args = parser.parse_args(argv)
    rounds_mlp, inner_mlp, rounds_chain = (5, 3, 5) if args.quick else (40, 10, 30)

    with common.matched_threads(args.threads) as note:
        print(note)
        print(common.machine_info())
        print()
        text, _ = bench_mlp(rounds_mlp, inner_mlp, common.settle if args.threads > 1 else None)
        print(text)
        print()
        text, _ = bench_chain(rounds_chain)
        print(text)


if __name__ == "__main__":
    main()
