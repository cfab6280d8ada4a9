"""The benchmarked workload: one SGD training step of a 784-256-128-10 MLP (batch 64, float32, cross-entropy).

Every contender starts from the same parameters and the same batch, so ``check_agreement`` can prove that
they compute the same step before any of them is timed (a fast wrong contender would make a meaningless
floor). Parameters are stored as PyTorch's ``nn.Linear`` stores them: weight (out, in), bias (out,).
"""

import numpy as np

SIZES = (784, 256, 128, 10)
BATCH = 64
LR = 0.01


def make_data(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32)
    y = rng.integers(0, SIZES[-1], size=BATCH).astype(np.int64)
    return x, y


def make_params(seed=1):
    """PyTorch's Linear initialisation: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weight and bias."""
    rng = np.random.default_rng(seed)
    params = []
    for fan_in, fan_out in zip(SIZES[:-1], SIZES[1:]):
        bound = 1.0 / np.sqrt(fan_in)
        params.append(rng.uniform(-bound, bound, (fan_out, fan_in)).astype(np.float32))
        params.append(rng.uniform(-bound, bound, fan_out).astype(np.float32))
    return params


# ----- the floor: numpy with hand-written gradients ---------------------------------------------------------
def numpy_step(params, x, y):
    """A training step in plain numpy: what an engine on numpy cannot beat. Returns the step function."""
    w1, b1, w2, b2, w3, b3 = [p.copy() for p in params]
    rows = np.arange(x.shape[0])
    inv_batch = np.float32(1.0 / x.shape[0])
    lr = np.float32(LR)

    def step():
        h1 = x @ w1.T
        h1 += b1
        np.maximum(h1, 0, out=h1)
        h2 = h1 @ w2.T
        h2 += b2
        np.maximum(h2, 0, out=h2)
        z = h2 @ w3.T
        z += b3
        z -= z.max(axis=1, keepdims=True)
        e = np.exp(z)
        s = e.sum(axis=1, keepdims=True)
        loss = np.log(s).mean() - z[rows, y].mean()
        e /= s  # softmax; its gradient w.r.t. z is (softmax - onehot) / batch
        e[rows, y] -= 1
        e *= inv_batch
        dz = e
        dw3 = dz.T @ h2
        db3 = dz.sum(axis=0)
        dh2 = dz @ w3
        dh2 *= h2 > 0
        dw2 = dh2.T @ h1
        db2 = dh2.sum(axis=0)
        dh1 = dh2 @ w2
        dh1 *= h1 > 0
        dw1 = dh1.T @ x
        db1 = dh1.sum(axis=0)
        for p, g in ((w1, dw1), (b1, db1), (w2, dw2), (b2, db2), (w3, dw3), (b3, db3)):
            g *= lr
            p -= g
        return float(loss)

    step.params = (w1, b1, w2, b2, w3, b3)
    return step


# ----- gradviz ---------------------------------------------------------------------------------------------
def gradviz_ops_step(params, x, y):
    """The step written with gradviz ops only (no nn/optim): matmul, relu, log_softmax, indexing, SGD by hand."""
    import gradviz

    ps = [gradviz.tensor(p.copy(), requires_grad=True) for p in params]
    w1, b1, w2, b2, w3, b3 = ps
    xv = gradviz.tensor(x)
    yv = gradviz.tensor(y)
    rows = gradviz.arange(x.shape[0])

    def step():
        h = (xv @ w1.t() + b1).relu()
        h = (h @ w2.t() + b2).relu()
        z = h @ w3.t() + b3
        loss = -z.log_softmax(dim=1)[rows, yv].mean()
        for p in ps:
            p.grad = None
        loss.backward()
        with gradviz.no_grad():
            for p in ps:
                p.sub_(p.grad, alpha=LR)
        return loss.item()

    step.params = tuple(p._data for p in ps)
    return step


def gradviz_nn_available():
    try:
        import gradviz.nn as nn
        import gradviz.optim as optim
    except ImportError:
        return False
    return all(hasattr(nn, n) for n in ("Linear", "ReLU", "Sequential", "CrossEntropyLoss")) and \
        hasattr(optim, "SGD")


def gradviz_nn_step(params, x, y):
    """The step as a PyTorch user writes it, with gradviz.nn and gradviz.optim."""
    import gradviz
    import gradviz.nn as nn
    import gradviz.optim as optim

    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
    _load(model, params, lambda a: gradviz.tensor(a.copy()), gradviz.no_grad)
    loss_fn = nn.CrossEntropyLoss()
    opt = optim.SGD(model.parameters(), lr=LR)
    xv = gradviz.tensor(x)
    yv = gradviz.tensor(y)

    def step():
        opt.zero_grad()
        loss = loss_fn(model(xv), yv)
        loss.backward()
        opt.step()
        return loss.item()

    step.params = tuple(p._data for p in model.parameters())
    step.model = model
    return step


# ----- PyTorch ---------------------------------------------------------------------------------------------
def torch_step(params, x, y):
    import torch
    from torch import nn

    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
    _load(model, params, lambda a: torch.from_numpy(a.copy()), torch.no_grad)
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    xv = torch.from_numpy(x)
    yv = torch.from_numpy(y)

    def step():
        opt.zero_grad()
        loss = loss_fn(model(xv), yv)
        loss.backward()
        opt.step()
        return loss.item()

    step.params = tuple(p.detach().numpy() for p in model.parameters())
    return step


def _load(model, params, convert, no_grad):
    linears = [m for m in model if hasattr(m, "weight")]
    with no_grad():
        for i, layer in enumerate(linears):
            layer.weight.copy_(convert(params[2 * i]))
            layer.bias.copy_(convert(params[2 * i + 1]))


def check_agreement(steps, steps_to_run=2):
    """Run each fresh step function a few times and compare losses and parameters with the first one.

    Returns a list of (name, max |loss diff|, max |param diff|); raises if any contender disagrees beyond
    float32 round-off, since a benchmark of a wrong computation means nothing.
    """
    names = list(steps)
    losses = {n: [steps[n]() for _ in range(steps_to_run)] for n in names}
    ref = names[0]
    report = []
    for n in names[1:]:
        dloss = max(abs(a - b) for a, b in zip(losses[n], losses[ref]))
        dparam = max(float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
                     for a, b in zip(steps[n].params, steps[ref].params))
        if dloss > 1e-4 or dparam > 1e-5:
            raise RuntimeError(f"{n} disagrees with {ref}: loss differs by {dloss:.3g}, parameters by {dparam:.3g}")
        report.append((n, dloss, dparam))
    return report
