"""RMSprop, Adagrad and Adadelta against torch.optim step by step (float64), and the learning-rate schedulers'
rate sequences against torch.optim.lr_scheduler over many steps."""

import math
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import gradviz as gv  # noqa: E402
import gradviz.optim as optim  # noqa: E402
from gradviz.optim import lr_scheduler  # noqa: E402

from .test_optim_oracle import _run_both as run_optimizers  # noqa: E402

pytestmark = pytest.mark.oracle
STEPS = 8


def _run_both(name, steps=STEPS, seed=0, **kwargs):
    """Same random gradients into both optimizers each step (one parameter skips a step); parameters compared
    after every step (``test_optim_oracle``'s harness), state at the end."""
    opt, topt = run_optimizers(getattr(optim, name), getattr(torch.optim, name), steps=steps, seed=seed, **kwargs)
    _assert_same_state(opt.state_dict(), topt.state_dict())
    return opt, topt


def _assert_same_state(ours, theirs):
    assert set(ours["state"]) == set(theirs["state"])
    for i, state in ours["state"].items():
        assert set(state) == set(theirs["state"][i])
        for key, value in state.items():
            assert value.dtype == gv.float64 or key == "step"
            np.testing.assert_allclose(value.numpy(), theirs["state"][i][key].numpy(), rtol=1e-12, atol=1e-15)
    assert [set(g) for g in ours["param_groups"]] == [set(g) for g in theirs["param_groups"]]


RMSPROP = [dict(), dict(lr=0.01, alpha=0.9, eps=1e-6), dict(lr=0.01, weight_decay=0.1),
           dict(lr=0.01, momentum=0.9), dict(lr=0.01, centered=True),
           dict(lr=0.005, momentum=0.5, centered=True, weight_decay=0.01, maximize=True)]
ADAGRAD = [dict(), dict(lr=0.1, lr_decay=0.05), dict(lr=0.1, weight_decay=0.1),
           dict(lr=0.1, initial_accumulator_value=0.5, eps=1e-6), dict(lr=0.05, lr_decay=0.01, maximize=True)]
ADADELTA = [dict(), dict(lr=0.5, rho=0.8, eps=1e-5), dict(weight_decay=0.1), dict(lr=2.0, maximize=True)]


@pytest.mark.parametrize("config", RMSPROP, ids=str)
def test_rmsprop_matches_torch(config):
    _run_both("RMSprop", **config)


@pytest.mark.parametrize("config", ADAGRAD, ids=str)
def test_adagrad_matches_torch(config):
    _run_both("Adagrad", **config)


@pytest.mark.parametrize("config", ADADELTA, ids=str)
def test_adadelta_matches_torch(config):
    _run_both("Adadelta", **config)


@pytest.mark.parametrize("name,kwargs", [("RMSprop", dict(momentum=0.9, centered=True)),
                                         ("Adagrad", dict(lr_decay=0.1)), ("Adadelta", {})], ids=str)
def test_repr_and_state_before_a_step_match_torch(name, kwargs):
    ours = getattr(optim, name)([gv.zeros(2, requires_grad=True)], **kwargs)
    theirs = getattr(torch.optim, name)([torch.zeros(2, requires_grad=True)], **kwargs)
    assert repr(ours) == repr(theirs)
    # Adagrad fills its state when built; the others at their first step
    assert {k: sorted(v) for k, v in ours.state_dict()["state"].items()} == \
        {k: sorted(v) for k, v in theirs.state_dict()["state"].items()}


@pytest.mark.parametrize("name,kwargs", [("RMSprop", dict(lr=0.01, momentum=0.9, centered=True)),
                                         ("Adagrad", dict(lr=0.1, lr_decay=0.1)), ("Adadelta", dict(lr=0.5))])
def test_state_dict_round_trip_continues_identically(name, kwargs):
    rng = np.random.default_rng(1)
    start = rng.standard_normal(5)
    grads = [rng.standard_normal(5) for _ in range(6)]

    def run(params, opt, gs):
        for g in gs:
            opt.zero_grad()
            params[0].grad = gv.tensor(g, dtype=gv.float64)
            opt.step()

    a = [gv.tensor(start, dtype=gv.float64, requires_grad=True)]
    opt_a = getattr(optim, name)(a, **kwargs)
    run(a, opt_a, grads)
    b = [gv.tensor(start, dtype=gv.float64, requires_grad=True)]
    opt_b = getattr(optim, name)(b, **kwargs)
    run(b, opt_b, grads[:3])
    fresh = getattr(optim, name)(b, **kwargs)
    fresh.load_state_dict(opt_b.state_dict())
    run(b, fresh, grads[3:])
    np.testing.assert_array_equal(a[0].detach().numpy(), b[0].detach().numpy())


@pytest.mark.parametrize("name,kwargs,message", [
    ("RMSprop", dict(alpha=-1), "Invalid alpha value: -1"),
    ("Adagrad", dict(lr_decay=-0.1), "Invalid lr_decay value: -0.1"),
    ("Adadelta", dict(rho=1.5), "Invalid rho value: 1.5"),
])
def test_bad_hyperparameters_use_torch_wording(name, kwargs, message):
    with pytest.raises(ValueError) as ours:
        getattr(optim, name)([gv.zeros(2, requires_grad=True)], **kwargs)
    with pytest.raises(ValueError) as theirs:
        getattr(torch.optim, name)([torch.zeros(2, requires_grad=True)], **kwargs)
    assert str(ours.value) == str(theirs.value) == message


# ----- schedulers ----------------------------------------------------------------------------------------------
def _pair(optimizer="SGD", groups=((0.1,),), **opt_kwargs):
    """The same optimizer, with one parameter group per entry of ``groups`` (its lr), in gradviz and torch."""
    ours = getattr(optim, optimizer)([{"params": [gv.zeros(2, requires_grad=True)], "lr": lr}
                                      for (lr,) in groups], **opt_kwargs)
    theirs = getattr(torch.optim, optimizer)([{"params": [torch.zeros(2, requires_grad=True)], "lr": lr}
                                              for (lr,) in groups], **opt_kwargs)
    return ours, theirs


def _sequence(scheduler, optimizer, steps, metrics=None):
    """get_last_lr() after building, then after each of ``steps`` optimizer+scheduler steps (with momentum or
    beta1 too, which OneCycleLR cycles)."""
    def now():
        group = optimizer.param_groups[0]
        return list(scheduler.get_last_lr()) + [group.get("momentum", group.get("betas", (None,))[0])]

    seen = [now()]
    for i in range(steps):
        optimizer.step()
        scheduler.step(*([metrics[i]] if metrics is not None else []))
        seen.append(now())
    return seen


SCHEDULERS = [
    ("StepLR", dict(step_size=3, gamma=0.5), {}),
    ("MultiStepLR", dict(milestones=[2, 5, 5, 9], gamma=0.3), {}),
    ("ExponentialLR", dict(gamma=0.9), {}),
    ("CosineAnnealingLR", dict(T_max=7, eta_min=0.001), {}),  # 40 steps: past T_max, up and down again
    ("CosineAnnealingLR", dict(T_max=10), dict(groups=((0.1,), (0.02,)))),
    ("OneCycleLR", dict(max_lr=0.5, total_steps=40), dict(momentum=0.9)),
    ("OneCycleLR", dict(max_lr=[0.5, 0.2], epochs=4, steps_per_epoch=10, pct_start=0.25, anneal_strategy="linear",
                        div_factor=10.0, final_div_factor=100.0), dict(groups=((0.1,), (0.1,)), momentum=0.9)),
    ("OneCycleLR", dict(max_lr=0.01, total_steps=40, three_phase=True), dict(optimizer="Adam")),
]


@pytest.mark.parametrize("name,kwargs,opt_kwargs", SCHEDULERS, ids=lambda v: str(v))
def test_scheduler_rates_match_torch(name, kwargs, opt_kwargs):
    opt_kwargs = dict(opt_kwargs)
    opt, topt = _pair(opt_kwargs.pop("optimizer", "SGD"), opt_kwargs.pop("groups", ((0.1,),)), **opt_kwargs)
    steps = kwargs.get("total_steps") or kwargs.get("epochs", 0) * kwargs.get("steps_per_epoch", 0) or 40
    ours = getattr(lr_scheduler, name)(opt, **kwargs)
    theirs = getattr(torch.optim.lr_scheduler, name)(topt, **kwargs)
    got, want = _sequence(ours, opt, steps), _sequence(theirs, topt, steps)
    np.testing.assert_allclose(np.array(got, dtype=float), np.array(want, dtype=float), rtol=1e-13, atol=1e-16)
    assert ours.last_epoch == theirs.last_epoch == steps
    assert opt.param_groups[0].keys() == topt.param_groups[0].keys()


def test_lambda_lr_matches_torch_and_saves_callable_objects_state():
    class Warmup:
        def __init__(self):
            self.length = 5

        def __call__(self, epoch):
            return min(1.0, (epoch + 1) / self.length)

    opt, topt = _pair(groups=((0.1,), (0.3,)))
    ours = lr_scheduler.LambdaLR(opt, [Warmup(), lambda e: 0.95 ** e])
    theirs = torch.optim.lr_scheduler.LambdaLR(topt, [Warmup(), lambda e: 0.95 ** e])
    np.testing.assert_allclose(_sequence(ours, opt, 30), _sequence(theirs, topt, 30), rtol=1e-13)
    state = ours.state_dict()
    assert state["lr_lambdas"] == [{"length": 5}, None] and "optimizer" not in state
    assert set(state) == set(theirs.state_dict())


def test_reduce_on_plateau_matches_torch():
    losses = [1.0, 0.9, 0.95, 0.95, 0.96, 0.97, 0.5, 0.5, 0.51, 0.52, 0.53, 0.54, 0.55, 0.2, 0.2, 0.2, 0.2, 0.2,
              0.2, 0.2, 0.2, 0.2, 0.2, 0.2]
    for kwargs in (dict(patience=2), dict(mode="max", factor=0.5, patience=1, cooldown=2, min_lr=0.02),
                   dict(patience=0, threshold=0.1, threshold_mode="abs", eps=1e-3)):
        opt, topt = _pair(groups=((0.1,), (0.05,)))
        ours = lr_scheduler.ReduceLROnPlateau(opt, **kwargs)
        theirs = torch.optim.lr_scheduler.ReduceLROnPlateau(topt, **kwargs)
        np.testing.assert_allclose(_sequence(ours, opt, len(losses), losses),
                                   _sequence(theirs, topt, len(losses), losses), rtol=1e-13)
        assert (ours.best, ours.num_bad_epochs, ours.cooldown_counter) == \
            (theirs.best, theirs.num_bad_epochs, theirs.cooldown_counter)


def test_scheduler_state_dict_resumes_the_sequence():
    opt, _ = _pair()
    sched = lr_scheduler.CosineAnnealingLR(opt, T_max=10)
    for _ in range(4):
        opt.step()
        sched.step()
    saved_state, saved_groups = sched.state_dict(), opt.state_dict()
    expected = _sequence(sched, opt, 6)[1:]
    opt2, _ = _pair()
    opt2.load_state_dict(saved_groups)
    resumed = lr_scheduler.CosineAnnealingLR(opt2, T_max=10)
    resumed.load_state_dict(saved_state)
    assert _sequence(resumed, opt2, 6)[1:] == expected
    assert set(saved_state) >= {"last_epoch", "base_lrs", "_last_lr", "T_max", "eta_min"}


def test_stepping_the_scheduler_first_warns_as_torch_does():
    opt, topt = _pair()
    ours, theirs = lr_scheduler.StepLR(opt, 2), torch.optim.lr_scheduler.StepLR(topt, 2)
    with warnings.catch_warnings(record=True) as ours_caught:
        warnings.simplefilter("always")
        ours.step()
    with warnings.catch_warnings(record=True) as theirs_caught:
        warnings.simplefilter("always")
        theirs.step()
    assert [str(w.message) for w in ours_caught] == [str(w.message) for w in theirs_caught]
    assert len(ours_caught) == 1


def test_one_cycle_past_its_total_steps_is_torch_error():
    opt, topt = _pair(momentum=0.9)
    ours = lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=3)
    theirs = torch.optim.lr_scheduler.OneCycleLR(topt, max_lr=1.0, total_steps=3)
    for scheduler, optimizer in ((ours, opt), (theirs, topt)):
        for _ in range(3):
            optimizer.step()
            scheduler.step()
        with pytest.raises(ValueError, match="^Tried to step 4 times. The specified number of total steps is 3$"):
            scheduler.step()
    assert ours.last_epoch == theirs.last_epoch == 4
    assert math.isclose(ours.get_last_lr()[0], theirs.get_last_lr()[0], rel_tol=1e-13)
