"""Leaves may keep backward's fresh gradient arrays as ``.grad`` (no copy); shared arrays must still be copied."""

import numpy as np

import gradviz as G


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
