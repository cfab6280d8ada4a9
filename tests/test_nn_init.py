"""Initialisation: PyTorch's bounds and spreads, drawn from gradviz's generator, written in place."""

import math

import numpy as np
import pytest

import gradviz as gv
import gradviz.nn as nn
from gradviz.nn import init


def _uniform_ok(values, bound):
    """All within [-bound, bound], reaching close to both ends, with a uniform's mean and variance."""
    v = np.asarray(values, dtype=np.float64).ravel()
    assert np.abs(v).max() <= bound * (1 + 1e-6)
    assert v.max() > 0.98 * bound and v.min() < -0.98 * bound
    assert abs(v.mean()) < 4 * bound / math.sqrt(3 * v.size)
    assert v.var() == pytest.approx(bound ** 2 / 3, rel=0.05)


def test_linear_init_matches_pytorchs_bounds():
    gv.manual_seed(0)
    lin = nn.Linear(400, 300)
    _uniform_ok(lin.weight.detach().numpy(), 1 / math.sqrt(400))  # kaiming_uniform_(a=sqrt(5))
    bias = lin.bias.detach().numpy()
    assert np.abs(bias).max() <= 1 / math.sqrt(400) and bias.std() > 0.5 / math.sqrt(3 * 400)
    assert lin.weight.dtype == gv.float32 and lin.weight.is_leaf and lin.weight.grad_fn is None


def test_conv_init_uses_fan_in_over_the_kernel():
    gv.manual_seed(1)
    conv = nn.Conv2d(16, 64, (3, 5))
    fan_in = 16 * 3 * 5
    _uniform_ok(conv.weight.detach().numpy(), 1 / math.sqrt(fan_in))
    assert np.abs(conv.bias.detach().numpy()).max() <= 1 / math.sqrt(fan_in)


def test_manual_seed_makes_models_reproducible():
    gv.manual_seed(5)
    a = nn.Linear(3, 4)
    gv.manual_seed(5)
    b = nn.Linear(3, 4)
    np.testing.assert_array_equal(a.weight.detach().numpy(), b.weight.detach().numpy())
    np.testing.assert_array_equal(a.bias.detach().numpy(), b.bias.detach().numpy())
    assert not np.array_equal(a.weight.detach().numpy(), nn.Linear(3, 4).weight.detach().numpy())


def test_kaiming_and_xavier_spreads():
    gv.manual_seed(2)
    w = nn.Parameter(gv.empty(300, 200))
    _uniform_ok(init.kaiming_uniform_(w).detach().numpy(), math.sqrt(6 / 200))  # relu-like gain sqrt(2)
    _uniform_ok(init.kaiming_uniform_(w, mode="fan_out", nonlinearity="relu").detach().numpy(),
                math.sqrt(6 / 300))
    _uniform_ok(init.xavier_uniform_(w, gain=2.0).detach().numpy(), 2.0 * math.sqrt(6 / 500))
    assert init.kaiming_normal_(w, mode="fan_out").detach().numpy().std() == pytest.approx(math.sqrt(2 / 300),
                                                                                           rel=0.02)
    assert init.xavier_normal_(w).detach().numpy().std() == pytest.approx(math.sqrt(2 / 500), rel=0.02)
    values = init.normal_(w, mean=3.0, std=0.5).detach().numpy()
    assert values.mean() == pytest.approx(3.0, abs=0.01) and values.std() == pytest.approx(0.5, rel=0.02)
    values = init.uniform_(w, -2.0, 1.0).detach().numpy()
    assert values.min() >= -2.0 and values.max() <= 1.0 and values.mean() == pytest.approx(-0.5, abs=0.02)


def test_init_is_in_place_without_history_and_bumps_the_version():
    p = nn.Parameter(gv.empty(3, 4))
    version = p.version
    assert init.constant_(p, 0.25) is p
    assert p.version == version + 1 and p.grad_fn is None and p.requires_grad
    assert (p.detach().numpy() == 0.25).all()
    assert not init.zeros_(p).detach().numpy().any()
    assert (init.ones_(p).detach().numpy() == 1).all()


def test_calculate_gain_table_and_fan_errors():
    assert init.calculate_gain("linear") == 1 and init.calculate_gain("sigmoid") == 1
    assert init.calculate_gain("relu") == pytest.approx(math.sqrt(2))
    assert init.calculate_gain("tanh") == pytest.approx(5 / 3)
    assert init.calculate_gain("leaky_relu", 0.2) == pytest.approx(math.sqrt(2 / 1.04))
    assert init.calculate_gain("selu") == 0.75
    with pytest.raises(ValueError, match="Unsupported nonlinearity gelu"):
        init.calculate_gain("gelu")
    with pytest.raises(ValueError, match="Fan in and fan out can not be computed for tensor with fewer than 2 "
                                         "dimensions"):
        init.xavier_uniform_(nn.Parameter(gv.empty(5)))
    with pytest.raises(ValueError, match="Mode fan_avg not supported"):
        init.kaiming_uniform_(nn.Parameter(gv.empty(2, 2)), mode="fan_avg")
