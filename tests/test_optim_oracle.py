"""SGD and Adam against torch.optim, step by step in float64: same gradients in, same parameters out."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import gradviz as gv  # noqa: E402
import gradviz.optim as optim  # noqa: E402

pytestmark = pytest.mark.oracle
STEPS = 6


def _run_both(ours_cls, theirs_cls, shapes=((3, 4), (4,)), steps=STEPS, seed=0, **kwargs):
    """Feed both optimizers the same random gradients each step (one parameter skips a step: grad None)."""
    rng = np.random.default_rng(seed)
    starts = [rng.standard_normal(s) for s in shapes]
    ours = [gv.tensor(a, dtype=gv.float64, requires_grad=True) for a in starts]
    theirs = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in starts]
    opt, topt = ours_cls(ours, **kwargs), theirs_cls(theirs, **kwargs)
    for step in range(steps):
        opt.zero_grad()
        topt.zero_grad()
        for i, (p, tp) in enumerate(zip(ours, theirs)):
            if i == 1 and step == 2:
                continue  # no gradient this step: both must leave it alone
            g = rng.standard_normal(p.shape)
            p.grad = gv.tensor(g, dtype=gv.float64)
            tp.grad = torch.tensor(g, dtype=torch.float64)
        opt.step()
        topt.step()
        for p, tp in zip(ours, theirs):
            np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=1e-12, atol=1e-12,
                                       err_msg=f"step {step}")
    return opt, topt


SGD_CONFIGS = [
    dict(lr=0.1),
    dict(lr=0.05, momentum=0.9),
    dict(lr=0.05, momentum=0.9, dampening=0.3),
    dict(lr=0.05, momentum=0.8, nesterov=True),
    dict(lr=0.1, weight_decay=0.01),
    dict(lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.05),
    dict(lr=0.05, momentum=0.7, nesterov=True, weight_decay=0.1, maximize=True),
]


@pytest.mark.parametrize("config", SGD_CONFIGS, ids=str)
def test_sgd_matches_torch(config):
    _run_both(optim.SGD, torch.optim.SGD, **config)


ADAM_CONFIGS = [
    dict(),
    dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6),
    dict(lr=0.01, weight_decay=0.1),
    dict(lr=0.02, amsgrad=True),
    dict(lr=0.02, amsgrad=True, weight_decay=0.05, maximize=True),
]


@pytest.mark.parametrize("config", ADAM_CONFIGS, ids=str)
def test_adam_matches_torch(config):
    _run_both(optim.Adam, torch.optim.Adam, **config)


@pytest.mark.parametrize("config", [dict(), dict(lr=0.01, weight_decay=0.1, amsgrad=True)], ids=str)
def test_adamw_matches_torch(config):
    _run_both(optim.AdamW, torch.optim.AdamW, **config)


def test_state_matches_torch_after_steps():
    opt, topt = _run_both(optim.Adam, torch.optim.Adam, amsgrad=True)
    ours, theirs = opt.state_dict(), topt.state_dict()
    assert set(ours["state"]) == set(theirs["state"])
    for i, state in ours["state"].items():
        assert set(state) == set(theirs["state"][i])
        for key, value in state.items():
            np.testing.assert_allclose(value.numpy(), theirs["state"][i][key].numpy(), rtol=1e-12)
    assert ours["param_groups"][0]["params"] == theirs["param_groups"][0]["params"]
    assert set(ours["param_groups"][0]) == set(theirs["param_groups"][0])


def test_group_keys_and_repr_match_torch():
    for ours_cls, theirs_cls, kwargs in ((optim.SGD, torch.optim.SGD, dict(lr=0.1, momentum=0.9)),
                                         (optim.Adam, torch.optim.Adam, {})):
        ours = ours_cls([gv.zeros(2, requires_grad=True)], **kwargs)
        theirs = theirs_cls([torch.zeros(2, requires_grad=True)], **kwargs)
        assert repr(ours) == repr(theirs)


def test_small_model_trains_identically():
    import gradviz.nn as nn

    def build(m):
        return m.Sequential(m.Linear(4, 8), m.Tanh(), m.Linear(8, 3))

    gv.manual_seed(0)
    model, tmodel = build(nn).double(), build(torch.nn).double()
    tmodel.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in model.state_dict().items()})
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    topt = torch.optim.SGD(tmodel.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((16, 4))
    y = rng.integers(0, 3, 16)
    for _ in range(5):
        for o, m, lib, loss_cls in ((opt, model, gv, nn.CrossEntropyLoss), (topt, tmodel, torch,
                                                                              torch.nn.CrossEntropyLoss)):
            o.zero_grad()
            loss_cls()(m(lib.tensor(x, dtype=lib.float64)), lib.tensor(y)).backward()
            o.step()
    for p, tp in zip(model.parameters(), tmodel.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=1e-10, atol=1e-12)
