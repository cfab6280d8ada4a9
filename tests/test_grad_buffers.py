"""Leaves may keep backward's fresh gradient arrays as ``.grad`` (no copy); shared arrays must still be copied."""

import numpy as np

import gradviz as G
from gradviz.autograd.observer import Observer, observing


def test_gradient_routed_to_two_leaves_is_not_shared():
    a, b = G.randn(3, requires_grad=True), G.randn(3, requires_grad=True)
    (a + b).sum().backward()
    assert not np.shares_memory(a.grad.numpy(), b.grad.numpy())
    a.grad.add_(1)
    assert b.grad.tolist() == [1.0, 1.0, 1.0]


def test_gradient_passed_by_the_user_is_not_aliased():
    x = G.randn(3, requires_grad=True)
    seed = G.ones(3)
    (x + 0).backward(seed)
    x.grad.mul_(5)
    assert seed.tolist() == [1.0, 1.0, 1.0]


def test_leaf_root_gradient_is_copied():
    x = G.randn(3, requires_grad=True)
    seed = G.ones(3)
    x.backward(seed)
    assert not np.shares_memory(x.grad.numpy(), seed.numpy())


def test_array_seen_by_a_leaf_hook_is_not_taken_over():
    x = G.randn(3, requires_grad=True)
    kept = []
    x.register_hook(kept.append)
    (x * 2).sum().backward()
    assert not np.shares_memory(x.grad.numpy(), kept[0].numpy())
    assert kept[0].tolist() == [2.0, 2.0, 2.0]


def test_accumulation_across_backward_calls_still_sums():
    w = G.randn(3, 4, requires_grad=True)
    x = G.randn(4, 2)
    (w @ x).sum().backward()
    first = w.grad.numpy().copy()
    (w @ x).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), 2 * first, rtol=1e-6)
    expected = np.broadcast_to(x.numpy().sum(axis=1), (3, 4))
    np.testing.assert_allclose(first, expected, rtol=1e-6)


class _SeesAccumulation(Observer):
    """Notes, for each accumulation into a leaf, whether the leaf now holds the very array backward made (taken
    over, no copy)."""

    def __init__(self):
        self.taken = []

    def on_accumulate(self, leaf, grad):
        self.taken.append(leaf._grad._data is grad)


def accumulations(step):
    seen = _SeesAccumulation()
    with observing(seen):
        step()
    return seen.taken


def test_an_array_a_built_in_backward_made_is_taken_over_without_a_copy():
    w, x = G.randn(3, 4, requires_grad=True), G.randn(4, 2)
    assert accumulations(lambda: (w @ x).sum().backward()) == [True]
    assert accumulations(lambda: (w @ x).sum().backward()) == [False]  # the second adds into the first


def test_an_array_a_custom_function_returns_is_copied():
    kept = []

    class KeepsItsGradient(G.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            out = grad * 2
            kept.append(out)  # the user's own reference to what backward returns
            return out

    x = G.randn(3, requires_grad=True)
    assert accumulations(lambda: KeepsItsGradient.apply(x).sum().backward()) == [False]
    x.grad.add_(1)
    assert kept[0].tolist() == [2.0, 2.0, 2.0]


def test_an_incoming_gradient_passed_on_is_copied():
    x = G.randn(3, requires_grad=True)
    seed = G.ones(3)
    assert accumulations(lambda: x.clone().backward(seed)) == [False]
    x.grad.mul_(5)
    assert seed.tolist() == [1.0, 1.0, 1.0]


def test_an_in_place_op_through_a_view_relays_its_inner_gradients_as_copies():
    base = G.randn(4, requires_grad=True)
    y = base * 1
    w = G.randn(2, requires_grad=True)
    y[:2].mul_(w)
    y.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), base.detach().numpy()[:2], rtol=1e-6)
    np.testing.assert_allclose(base.grad.numpy(), np.r_[w.detach().numpy(), 1.0, 1.0], rtol=1e-6)
