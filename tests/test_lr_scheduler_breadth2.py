"""LinearLR, SequentialLR, CosineAnnealingWarmRestarts: learning-rate sequences against PyTorch's."""

import warnings

import numpy as np
import pytest

import gradviz as gv


def _optimizer(lib, groups=1):
    params = [lib.nn.Parameter(lib.ones(2)) for _ in range(groups)]
    return lib.optim.SGD([{"params": [p], "lr": 0.1 * (i + 1)} for i, p in enumerate(params)], lr=0.1)


def _schedule(lib, make, steps, epochs=None):
    opt = _optimizer(lib, groups=2)
    sched = make(lib.optim.lr_scheduler, opt)
    seen = [sched.get_last_lr()]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(steps):
            opt.step()
            if epochs is None:
                sched.step()
            else:
                sched.step(epochs[i])
            seen.append(sched.get_last_lr())
            assert [g["lr"] for g in opt.param_groups] == seen[-1]
    return seen, sched


SCHEDULES = {
    "linear warm-up": lambda S, o: S.LinearLR(o, start_factor=0.25, total_iters=4),
    "linear decay": lambda S, o: S.LinearLR(o, start_factor=1.0, end_factor=0.1, total_iters=6),
    "warm restarts": lambda S, o: S.CosineAnnealingWarmRestarts(o, T_0=3),
    "warm restarts T_mult=2": lambda S, o: S.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=2, eta_min=0.01),
    "sequential warm-up then cosine": lambda S, o: S.SequentialLR(
        o, [S.LinearLR(o, start_factor=0.1, total_iters=3), S.CosineAnnealingLR(o, T_max=5)], milestones=[3]),
    "sequential three": lambda S, o: S.SequentialLR(
        o, [S.LinearLR(o, start_factor=0.5, total_iters=2), S.ExponentialLR(o, gamma=0.9),
            S.StepLR(o, step_size=2, gamma=0.5)], milestones=[2, 5]),
    "chained": lambda S, o: (S.ExponentialLR(o, gamma=0.9), S.LinearLR(o, start_factor=0.5, total_iters=3))[1],
}


@pytest.mark.oracle
@pytest.mark.parametrize("name", list(SCHEDULES))
def test_lr_sequence_matches_torch(name):
    torch = pytest.importorskip("torch")
    got, _ = _schedule(gv, SCHEDULES[name], 14)
    expected, _ = _schedule(torch, SCHEDULES[name], 14)
    np.testing.assert_allclose(np.array(got), np.array(expected), rtol=1e-12, atol=1e-15)


@pytest.mark.oracle
def test_warm_restarts_fractional_epochs_match_torch():
    torch = pytest.importorskip("torch")
    epochs = [0.5, 1.0, 1.5, 2.0, 5.25, 6.0, 13.9, 3.0]
    make = lambda S, o: S.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=2)  # noqa: E731
    got, _ = _schedule(gv, make, len(epochs), epochs)
    expected, _ = _schedule(torch, make, len(epochs), epochs)
    np.testing.assert_allclose(np.array(got), np.array(expected), rtol=1e-12)


def _resumed(lib, make):
    """Four steps, then a new optimizer and scheduler loaded from their state_dicts take two more."""
    opt = _optimizer(lib, groups=2)
    sched = make(lib.optim.lr_scheduler, opt)
    for _ in range(4):
        opt.step()
        sched.step()
    opt_state, sched_state = opt.state_dict(), sched.state_dict()
    fresh_opt = _optimizer(lib, groups=2)
    fresh = make(lib.optim.lr_scheduler, fresh_opt)
    fresh_opt.load_state_dict(opt_state)
    fresh.load_state_dict(sched_state)
    lrs = []
    for _ in range(2):
        fresh_opt.step()
        fresh.step()
        lrs.append(fresh.get_last_lr())
    return sched_state, lrs


@pytest.mark.oracle
def test_sequential_state_dict_round_trip_matches_torch():
    torch = pytest.importorskip("torch")
    make = SCHEDULES["sequential warm-up then cosine"]
    state, got = _resumed(gv, make)
    torch_state, expected = _resumed(torch, make)
    assert [s["last_epoch"] for s in state["_schedulers"]] == [s["last_epoch"] for s in torch_state["_schedulers"]]
    assert state["last_epoch"] == torch_state["last_epoch"] == 4 and state["_milestones"] == [3]
    np.testing.assert_allclose(np.array(got), np.array(expected), rtol=1e-12)


@pytest.mark.oracle
@pytest.mark.parametrize("call", ["linear start 0", "linear end 2", "restarts T_0", "restarts T_mult",
                                  "sequential milestones", "sequential empty", "sequential plateau"])
def test_errors_match_torch(call):
    torch = pytest.importorskip("torch")

    def run(lib):
        S, o = lib.optim.lr_scheduler, _optimizer(lib)
        if call == "linear start 0":
            return S.LinearLR(o, start_factor=0)
        if call == "linear end 2":
            return S.LinearLR(o, end_factor=2)
        if call == "restarts T_0":
            return S.CosineAnnealingWarmRestarts(o, T_0=0)
        if call == "restarts T_mult":
            return S.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=0)
        if call == "sequential milestones":
            return S.SequentialLR(o, [S.LinearLR(o), S.ExponentialLR(o, 0.9)], milestones=[1, 2])
        if call == "sequential empty":
            return S.SequentialLR(o, [], milestones=[])
        return S.SequentialLR(o, [S.LinearLR(o), S.ReduceLROnPlateau(o)], milestones=[2])

    with pytest.raises((ValueError, TypeError)) as expected:
        run(torch)
    with pytest.raises(type(expected.value)) as got:
        run(gv)
    assert str(got.value) == str(expected.value)
