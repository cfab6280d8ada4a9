"""nn.init.trunc_normal_, orthogonal_, eye_: distributions and properties (PyTorch draws other numbers)."""

import math
import warnings

import numpy as np
import pytest

import gradviz as gv
from gradviz.nn import init


def test_trunc_normal_stays_in_bounds_with_the_truncated_moments():
    gv.manual_seed(0)
    w = init.trunc_normal_(gv.empty(200, 500), mean=0.5, std=2.0, a=-1.0, b=3.0)
    data = w.numpy().astype(np.float64)
    assert data.min() >= -1.0 and data.max() <= 3.0
    # moments of the truncated normal: mean + std * (phi(alpha) - phi(beta)) / Z
    alpha, beta = (-1.0 - 0.5) / 2.0, (3.0 - 0.5) / 2.0
    phi = lambda x: math.exp(-x * x / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    cdf = lambda x: (1 + math.erf(x / math.sqrt(2))) / 2  # noqa: E731
    z = cdf(beta) - cdf(alpha)
    expected_mean = 0.5 + 2.0 * (phi(alpha) - phi(beta)) / z
    expected_var = 4.0 * (1 + (alpha * phi(alpha) - beta * phi(beta)) / z - ((phi(alpha) - phi(beta)) / z) ** 2)
    assert abs(data.mean() - expected_mean) < 0.01
    assert abs(data.var() - expected_var) < 0.02
    assert w.requires_grad is False


def test_trunc_normal_far_interval_warns_as_pytorch_and_still_bounds():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        w = init.trunc_normal_(gv.empty(1000), mean=0.0, std=1.0, a=5.0, b=6.0)
    assert [str(c.message) for c in caught] == [
        "mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The distribution of values may be incorrect."]
    assert w.numpy().min() >= 5.0 and w.numpy().max() <= 6.0


def test_trunc_normal_generator_is_reproducible():
    a = init.trunc_normal_(gv.empty(5), generator=gv.Generator().manual_seed(3))
    b = init.trunc_normal_(gv.empty(5), generator=gv.Generator().manual_seed(3))
    assert a.tolist() == b.tolist()


@pytest.mark.parametrize("shape", [(3, 5), (5, 3), (4, 2, 3), (4, 4)])
def test_orthogonal_rows_or_columns_are_orthonormal(shape):
    w = gv.empty(*shape, dtype=gv.float64)
    init.orthogonal_(w, gain=2.0)
    flat = w.numpy().reshape(shape[0], -1)
    gram = flat @ flat.T if flat.shape[0] <= flat.shape[1] else flat.T @ flat
    np.testing.assert_allclose(gram, 4.0 * np.eye(gram.shape[0]), atol=1e-12)


@pytest.mark.oracle
@pytest.mark.parametrize("call", ["orthogonal 1d", "eye 3d"])
def test_errors_match_torch(call):
    torch = pytest.importorskip("torch")

    def run(lib, nn_init):
        if call == "orthogonal 1d":
            return nn_init.orthogonal_(lib.empty(3))
        return nn_init.eye_(lib.empty(2, 2, 2))

    with pytest.raises(ValueError) as expected:
        run(torch, torch.nn.init)
    with pytest.raises(ValueError) as got:
        run(gv, init)
    assert str(got.value) == str(expected.value)


@pytest.mark.oracle
def test_eye_matches_torch():
    torch = pytest.importorskip("torch")
    np.testing.assert_array_equal(init.eye_(gv.empty(2, 3)).numpy(), torch.nn.init.eye_(torch.empty(2, 3)).numpy())
