"""Every nn functional and module against central differences, in float64 (gradviz.autograd.gradcheck)."""

import numpy as np
import pytest

import gradviz as gv
import gradviz.nn as nn
import gradviz.nn.functional as F
from gradviz.autograd import gradcheck


def _var(shape, seed, low=None, high=None, requires_grad=True):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape) if low is None else rng.uniform(low, high, shape)
    return gv.tensor(a, dtype=gv.float64, requires_grad=requires_grad)


CONV_CONFIGS = [
    dict(stride=1, padding=0, dilation=1),
    dict(stride=2, padding=1, dilation=1),
    dict(stride=(1, 2), padding=(2, 1), dilation=(2, 1)),
    dict(stride=1, padding="same", dilation=2),
]


@pytest.mark.parametrize("config", CONV_CONFIGS, ids=str)
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
def test_conv2d_gradients(config, bias):
    x = _var((2, 2, 6, 5), 0)
    w = _var((3, 2, 3, 2), 1)
    b = _var((3,), 2) if bias else None
    inputs = (x, w, b) if bias else (x, w)
    assert gradcheck(lambda *a: F.conv2d(*a, **config), inputs)


def test_conv2d_unbatched_and_even_kernel_same_padding():
    x = _var((2, 5, 5), 3)
    w = _var((2, 2, 2, 2), 4)
    out = F.conv2d(x, w, padding="same")
    assert out.shape == (2, 5, 5)
    assert gradcheck(lambda a, b: F.conv2d(a, b, padding="same"), (x, w))


@pytest.mark.parametrize("kwargs", [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=(2, 3), stride=1),  # overlapping windows: one element can win twice
    dict(kernel_size=2, stride=2, dilation=2),
    dict(kernel_size=3, stride=2, ceil_mode=True),
], ids=str)
def test_max_pool2d_gradients(kwargs):
    x = _var((2, 2, 7, 6), 5)
    assert gradcheck(lambda a: F.max_pool2d(a, **kwargs), (x,))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_and_l1_gradients_reach_input_and_target(reduction):
    a, b = _var((3, 4), 6), _var((3, 4), 7)
    assert gradcheck(lambda x, t: F.mse_loss(x, t, reduction=reduction), (a, b))
    assert gradcheck(lambda x, t: F.l1_loss(x, t, reduction=reduction), (a, b))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True], ids=["plain", "weighted"])
def test_binary_cross_entropy_gradients(reduction, weighted):
    x = _var((3, 4), 8, 0.05, 0.95)
    t = _var((3, 4), 9, 0.0, 1.0)
    w = _var((4,), 10, 0.5, 2.0, requires_grad=False) if weighted else None
    assert gradcheck(lambda a, b: F.binary_cross_entropy(a, b, weight=w, reduction=reduction), (x, t))


TARGET = gv.tensor([2, 0, 3, 3, 1])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("extra", [{}, {"ignore_index": 3}, {"weight": "w"}], ids=["plain", "ignore", "weight"])
def test_nll_and_cross_entropy_gradients(reduction, extra):
    extra = dict(extra)
    if extra.get("weight") == "w":
        extra["weight"] = gv.tensor([0.5, 1.0, 2.0, 1.5], dtype=gv.float64)
    x = _var((5, 4), 11)
    assert gradcheck(lambda a: F.cross_entropy(a, TARGET, reduction=reduction, **extra), (x,))
    assert gradcheck(lambda a: F.nll_loss(F.log_softmax(a, dim=1), TARGET, reduction=reduction, **extra), (x,))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_spatial_and_probability_targets(reduction):
    x = _var((2, 3, 2, 2), 12)
    spatial = gv.tensor([[[0, 2], [1, 1]], [[2, 2], [0, 1]]])
    assert gradcheck(lambda a: F.cross_entropy(a, spatial, reduction=reduction), (x,))
    probs = gv.tensor(np.random.default_rng(13).dirichlet(np.ones(3), size=4), dtype=gv.float64,
                      requires_grad=True)
    logits = _var((4, 3), 14)
    assert gradcheck(lambda a, p: F.cross_entropy(a, p, reduction=reduction), (logits, probs))


def test_single_sample_cross_entropy():
    x = _var((4,), 15)
    assert gradcheck(lambda a: F.cross_entropy(a, gv.tensor(2)), (x,))


@pytest.mark.parametrize("shape", [(5, 3), (2, 4, 3), (3,)], ids=str)
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
def test_linear_gradients(shape, bias):
    x, w = _var(shape, 16), _var((2, 3), 17)
    inputs = (x, w, _var((2,), 18)) if bias else (x, w)
    assert gradcheck(F.linear, inputs)


@pytest.mark.parametrize("fn", [F.relu, F.sigmoid, F.tanh, lambda a: F.softmax(a, dim=1),
                                lambda a: F.log_softmax(a, dim=0)],
                         ids=["relu", "sigmoid", "tanh", "softmax", "log_softmax"])
def test_activation_gradients(fn):
    assert gradcheck(fn, (_var((3, 4), 19),))


def test_dropout_gradient_is_the_mask_it_drew():
    x = _var((4, 5), 20)
    gv.manual_seed(3)
    out = F.dropout(x, p=0.4)
    out.sum().backward()
    kept = out.detach().numpy() != 0
    np.testing.assert_allclose(x.grad.numpy(), kept / 0.6)
    np.testing.assert_allclose(out.detach().numpy(), x.detach().numpy() * kept / 0.6)


def _small_cnn():
    gv.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(8, 3), nn.Tanh(), nn.Linear(3, 2), nn.Sigmoid()).double()


def test_whole_small_cnn_with_respect_to_every_parameter():
    model = _small_cnn()
    x = _var((2, 1, 4, 4), 21)
    params = list(model.parameters())

    def run(inp, *ps):
        return model(inp)

    assert gradcheck(run, (x, *params))


@pytest.mark.parametrize("module", [nn.MSELoss, nn.L1Loss], ids=lambda m: m.__name__)
def test_loss_modules_match_functional(module):
    a, b = _var((3, 2), 22), _var((3, 2), 23)
    for reduction in ("mean", "sum", "none"):
        got = module(reduction=reduction)(a, b).detach().numpy()
        diff = a.detach().numpy() - b.detach().numpy()
        elementwise = diff ** 2 if module is nn.MSELoss else np.abs(diff)
        want = {"mean": elementwise.mean(), "sum": elementwise.sum(), "none": elementwise}[reduction]
        np.testing.assert_allclose(got, want, rtol=1e-12)
