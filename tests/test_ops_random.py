"""Sampling functions: reproducible under gradviz.manual_seed, distributed as asked, with PyTorch's shapes,
dtypes, (zero) gradients and error text; logspace and one_hot against PyTorch."""

import numpy as np
import pytest

import gradviz as gv
import gradviz.nn.functional as F

from .oracle_ops import compare, same_error

DRAWS = {
    "rand_like": lambda: gv.rand_like(gv.zeros(3, 4, dtype=gv.float64)),
    "randn_like": lambda: gv.randn_like(gv.zeros(3, 4)),
    "randperm": lambda: gv.randperm(10),
    "multinomial": lambda: gv.multinomial(gv.tensor([[1.0, 2.0, 0.0, 4.0]]), 3),
    "multinomial with replacement": lambda: gv.tensor([0.2, 0.8]).multinomial(6, replacement=True),
    "bernoulli": lambda: gv.bernoulli(gv.full((5,), 0.5)),
    "bernoulli p": lambda: gv.zeros(5).bernoulli(0.3),
    "bernoulli_": lambda: gv.zeros(5).bernoulli_(0.7),
    "normal numbers": lambda: gv.normal(1.0, 2.0, (3,)),
    "normal tensors": lambda: gv.normal(gv.zeros(3), gv.ones(2, 1)),
}


@pytest.mark.parametrize("name", DRAWS)
def test_manual_seed_makes_draws_reproducible(name):
    gv.manual_seed(7)
    first = DRAWS[name]().numpy().copy()
    second = DRAWS[name]().numpy().copy()
    gv.manual_seed(7)
    again = DRAWS[name]().numpy()
    np.testing.assert_array_equal(first, again)
    if name not in ("bernoulli", "bernoulli p", "bernoulli_", "multinomial"):  # few outcomes: may repeat
        assert not np.array_equal(first, second)


def test_multinomial_with_replacement_follows_the_weights():
    gv.manual_seed(0)
    weights = gv.tensor([[1.0, 0.0, 3.0], [0.0, 5.0, 5.0]])
    draws = gv.multinomial(weights, 20000, replacement=True).numpy()
    assert draws.shape == (2, 20000) and draws.dtype == np.int64
    np.testing.assert_allclose(np.bincount(draws[0], minlength=3) / 20000, [0.25, 0, 0.75], atol=0.015)
    np.testing.assert_allclose(np.bincount(draws[1], minlength=3) / 20000, [0, 0.5, 0.5], atol=0.015)


def test_multinomial_without_replacement_draws_distinct_categories_by_weight():
    gv.manual_seed(0)
    weights = gv.tensor([[1.0, 0.0, 3.0, 6.0]]).expand(5000, 4)
    draws = gv.multinomial(weights, 3).numpy()
    assert all(len(set(row)) == 3 for row in draws[:200])
    assert not (draws == 1).any()  # a zero weight is never taken while others remain
    np.testing.assert_allclose(np.bincount(draws[:, 0], minlength=4) / 5000, [0.1, 0, 0.3, 0.6], atol=0.02)
    everything = gv.multinomial(gv.tensor([0.0, 1.0, 2.0]), 3).numpy()
    assert sorted(everything) == [0, 1, 2] and everything[-1] == 0  # the zero weight comes last


def test_bernoulli_and_normal_follow_their_parameters():
    gv.manual_seed(1)
    p = gv.tensor([0.1, 0.5, 0.9]).expand(20000, 3)
    np.testing.assert_allclose(gv.bernoulli(p).numpy().mean(0), [0.1, 0.5, 0.9], atol=0.015)
    samples = gv.normal(gv.tensor([-1.0, 3.0]), gv.tensor([0.5, 2.0]).expand(20000, 2)).numpy()
    np.testing.assert_allclose(samples.mean(0), [-1.0, 3.0], atol=0.05)
    np.testing.assert_allclose(samples.std(0), [0.5, 2.0], rtol=0.03)


@pytest.mark.oracle
def test_shapes_dtypes_and_zero_gradients_match_pytorch():
    torch = pytest.importorskip("torch")
    for lib in (gv, torch):
        lib.manual_seed(0)
    pairs = []
    for lib in (gv, torch):
        mean = lib.zeros(2, 3, requires_grad=True)
        std = lib.ones(3, dtype=lib.float32, requires_grad=True)
        probs = lib.full((2, 3), 0.5, requires_grad=True)
        outs = [lib.normal(mean, std), lib.normal(mean, 2.0), lib.normal(0.0, std), lib.bernoulli(probs),
                lib.normal(0.0, 1.0, (4,)), lib.rand_like(mean), lib.randn_like(std, dtype=lib.float64),
                lib.randperm(5), lib.multinomial(lib.ones(2, 4), 2), lib.bernoulli(mean.detach(), 0.5)]
        sum(o.sum() for o in outs[:4]).backward()
        pairs.append((outs, [mean.grad, std.grad, probs.grad]))
    (ours, ours_grads), (theirs, theirs_grads) = pairs
    for o, t in zip(ours, theirs):
        assert tuple(o.shape) == tuple(t.shape)
        assert str(o.dtype) == str(t.dtype).replace("torch.", "")
        assert o.requires_grad == t.requires_grad and (o.grad_fn is None) == (t.grad_fn is None)
    for o, t in zip(ours_grads, theirs_grads):
        np.testing.assert_array_equal(o.numpy(), t.numpy())


@pytest.mark.oracle
@pytest.mark.parametrize("args", [(0, 2, 5), (-1, 1, 3), (0, 3, 4, 2.0)], ids=str)
def test_logspace_matches_pytorch(args):
    pytest.importorskip("torch")
    compare(lambda L: L.logspace(*args[:3], base=args[3] if len(args) > 3 else 10.0))
    compare(lambda L: L.logspace(*args[:3], dtype=L.float64))


ERRORS = {
    "multinomial negative": (lambda L, w: L.multinomial(w, 1), np.array([0.0, 1.0, -2.0])),
    "multinomial zero sum": (lambda L, w: L.multinomial(w, 1), np.array([0.0, 0.0])),
    "multinomial too many": (lambda L, w: L.multinomial(w, 4), np.array([1.0, 1.0, 1.0])),
    "multinomial rank": (lambda L, w: L.multinomial(w, 1), np.ones((2, 2, 2))),
    "rand_like of ints": (lambda L, x: L.rand_like(x), np.arange(3)),
    "randn_like of ints": (lambda L, x: L.randn_like(x), np.arange(3)),
    "one_hot floats": (lambda L, x: _F(L).one_hot(x), np.array([0.0, 2.0])),
    "one_hot negative": (lambda L, x: _F(L).one_hot(x), np.array([-1, 2])),
    "one_hot too small": (lambda L, x: _F(L).one_hot(x, 2), np.array([0, 2])),
}


def _F(lib):
    return F if lib is gv else lib.nn.functional


@pytest.mark.oracle
@pytest.mark.parametrize("name", ERRORS)
def test_error_matches_pytorch(name):
    pytest.importorskip("torch")
    fn, *arrays = ERRORS[name]
    same_error(fn, *arrays)


@pytest.mark.oracle
@pytest.mark.parametrize("labels,classes", [(np.array([0, 2, 1]), -1), (np.array([[1], [3]]), 5),
                                            (np.zeros((0,), dtype=np.int64), 3)], ids=str)
def test_one_hot_matches_pytorch(labels, classes):
    pytest.importorskip("torch")
    compare(lambda L, t: _F(L).one_hot(t, classes), labels)


def test_new_factories_take_a_cpu_device_and_refuse_any_other_in_one_line():
    x = gv.ones(2, 3)
    assert gv.rand_like(x, device="cpu").shape == (2, 3)
    assert gv.randn_like(x, device="cpu").shape == (2, 3)
    assert gv.logspace(0, 2, 3, device="cpu").tolist() == [1.0, 10.0, 100.0]
    assert gv.normal(0.0, 1.0, (4,), device="cpu").shape == (4,)
    for make in (lambda: gv.rand_like(x, device="cuda"), lambda: gv.logspace(0, 1, 2, device="cuda:0"),
                 lambda: gv.normal(0.0, 1.0, (2,), device="cuda")):
        with pytest.raises(AssertionError, match=r"^Torch not compiled with CUDA enabled: gradviz's engine runs on"):
            make()
