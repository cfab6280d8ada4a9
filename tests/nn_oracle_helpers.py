"""Shared helpers of the nn oracle tests: the same weights in gradviz and PyTorch, then outputs and every
gradient compared (float64, 1e-6 by default)."""

import numpy as np

import gradviz as gv


def pair(torch, shape, seed, low=None, high=None, requires_grad=True):
    """The same float64 values as a gradviz and a torch leaf."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape) if low is None else rng.uniform(low, high, shape)
    return (gv.tensor(a, dtype=gv.float64, requires_grad=requires_grad),
            torch.tensor(a, dtype=torch.float64, requires_grad=requires_grad))


def copy_weights(torch, ours, theirs):
    """Load our module's state (parameters and buffers, by state_dict key) into the torch module; the key sets
    must be identical."""
    state = {k: torch.from_numpy(np.array(v.numpy(), copy=True)) for k, v in ours.state_dict().items()}
    assert list(state) == list(theirs.state_dict()), "state_dict keys differ from PyTorch's"
    theirs.load_state_dict(state)


def close(ours, theirs, tol=1e-6):
    if ours is None or theirs is None:
        assert ours is None and theirs is None, f"one side is None: {ours!r} vs {theirs!r}"
        return
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=tol, atol=tol)


def flat(out):
    """The tensors of a (possibly nested) module output, in order."""
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in flat(o)]
    return [] if out is None else [out]


def backward_both(torch, outs, touts, seed=1):
    """Backward a random linear combination of every output through both engines."""
    rng = np.random.default_rng(seed)
    total = ttotal = None
    for o, to in zip(outs, touts):
        if not to.requires_grad:
            continue
        g = rng.standard_normal(tuple(to.shape))
        term, tterm = (o * gv.tensor(g, dtype=gv.float64)).sum(), (to * torch.tensor(g)).sum()
        total = term if total is None else total + term
        ttotal = tterm if ttotal is None else ttotal + tterm
    total.backward()
    ttotal.backward()


def compare_module(torch, ours, theirs, inputs, tol=1e-6, seed=1):
    """Run ``ours`` and ``theirs`` (already holding the same weights, in float64) on the same inputs; compare
    outputs, input gradients and parameter gradients by name."""
    outs = flat(ours(*[i[0] for i in inputs]))
    touts = flat(theirs(*[i[1] for i in inputs]))
    assert len(outs) == len(touts)
    for o, to in zip(outs, touts):
        close(o, to, tol)
    backward_both(torch, outs, touts, seed)
    for x, tx in inputs:
        if isinstance(x, gv.Tensor) and x.requires_grad:
            close(x.grad, tx.grad, tol)
    theirs_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        close(p.grad, theirs_params[name].grad, tol)
    return outs, touts
