"""NAdam and RAdam step by step against PyTorch's (parameters and state after every step)."""

import numpy as np
import pytest

import gradviz as gv

VARIANTS = [
    ("NAdam", {}),
    ("NAdam", {"lr": 0.05, "weight_decay": 0.1}),
    ("NAdam", {"lr": 0.05, "weight_decay": 0.1, "decoupled_weight_decay": True, "momentum_decay": 0.01}),
    ("NAdam", {"betas": (0.8, 0.99), "maximize": True}),
    ("RAdam", {}),
    ("RAdam", {"lr": 0.05, "weight_decay": 0.1}),
    ("RAdam", {"lr": 0.05, "weight_decay": 0.1, "decoupled_weight_decay": True}),
    ("RAdam", {"betas": (0.5, 0.9), "maximize": True}),  # rho_t passes 5 early: both branches run
]


def _run(lib, name, kwargs, dtype, steps=12):
    rng = np.random.default_rng(0)
    w = lib.nn.Parameter(lib.tensor(rng.standard_normal((3, 4)), dtype=getattr(lib, dtype)))
    b = lib.nn.Parameter(lib.tensor(rng.standard_normal(4), dtype=getattr(lib, dtype)))
    x = lib.tensor(rng.standard_normal((5, 3)), dtype=getattr(lib, dtype))
    opt = getattr(lib.optim, name)([w, b], **kwargs)
    history = []
    for _ in range(steps):
        opt.zero_grad()
        loss = ((x @ w + b).tanh() ** 2).sum() + (w ** 4).sum() * 0.01
        loss.backward()
        opt.step()
        state = opt.state[w]
        history.append((w.detach().numpy().copy(), b.detach().numpy().copy(),
                        {k: np.asarray(v.detach().numpy() if hasattr(v, "detach") else v) for k, v in state.items()}))
    return history


@pytest.mark.oracle
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name, kwargs", VARIANTS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(VARIANTS)])
def test_steps_match_torch(name, kwargs, dtype):
    torch = pytest.importorskip("torch")
    got, expected = _run(gv, name, kwargs, dtype), _run(torch, name, kwargs, dtype)
    rtol = 1e-5 if dtype == "float32" else 1e-12
    for step, ((gw, gb, gs), (tw, tb, ts)) in enumerate(zip(got, expected)):
        np.testing.assert_allclose(gw, tw, rtol=rtol, atol=rtol * 1e-2, err_msg=f"w after step {step + 1}")
        np.testing.assert_allclose(gb, tb, rtol=rtol, atol=rtol * 1e-2, err_msg=f"b after step {step + 1}")
        assert set(gs) == set(ts)
        for key in ts:
            np.testing.assert_allclose(gs[key], ts[key], rtol=rtol, atol=rtol * 1e-2, err_msg=key)
            assert gs[key].dtype == ts[key].dtype, key


@pytest.mark.oracle
@pytest.mark.parametrize("name, kwargs", [("NAdam", {"lr": -1}), ("NAdam", {"momentum_decay": -1}),
                                          ("RAdam", {"eps": -1}), ("RAdam", {"betas": (0.9, 1.0)}),
                                          ("NAdam", {"weight_decay": -0.1})])
def test_errors_match_torch(name, kwargs):
    torch = pytest.importorskip("torch")
    with pytest.raises(ValueError) as expected:
        getattr(torch.optim, name)([torch.nn.Parameter(torch.ones(1))], **kwargs)
    with pytest.raises(ValueError) as got:
        getattr(gv.optim, name)([gv.nn.Parameter(gv.ones(1))], **kwargs)
    assert str(got.value) == str(expected.value)


@pytest.mark.oracle
def test_state_dict_round_trip_continues_like_torch():
    torch = pytest.importorskip("torch")

    def run(lib):
        p = lib.nn.Parameter(lib.tensor([1.0, -2.0]))
        opt = lib.optim.NAdam([p], lr=0.1)
        for _ in range(3):
            opt.zero_grad()
            (p ** 2).sum().backward()
            opt.step()
        fresh = lib.optim.NAdam([p], lr=0.1)
        fresh.load_state_dict(opt.state_dict())
        fresh.zero_grad()
        (p ** 2).sum().backward()
        fresh.step()
        return p.detach().numpy()

    np.testing.assert_allclose(run(gv), run(torch), rtol=1e-6)
