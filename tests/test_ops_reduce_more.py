"""Reductions, cumulative ops and sorting against PyTorch: values, dtypes (integer inputs included), gradients
(ties and zeros included) and error text."""

import numpy as np
import pytest

import gradviz as gv

from .oracle_ops import compare, same_error

pytestmark = pytest.mark.oracle


def _r(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


TIES = np.array([[1.0, 3.0, 3.0, -2.0], [0.5, 0.5, 0.5, 0.5], [-1.0, 2.0, -3.0, 3.0]])
ZEROS = np.array([[1.5, 0.0, 2.0, -1.0], [0.0, 0.0, 3.0, 2.0], [2.0, -0.5, 1.0, 0.0]])
INTS = np.array([[1, 2, 3], [4, 5, 6]])
BOOLS = np.array([[True, False, True], [True, True, True]])

CASES = {
    "sort": (lambda L, x: x.sort(), _r(3, 4)),
    "sort dim 0 descending": (lambda L, x: L.sort(x, 0, descending=True), _r(3, 4)),
    "sort stable ties": (lambda L, x: x.sort(stable=True), TIES),
    "sort descending stable ties": (lambda L, x: x.sort(dim=1, descending=True, stable=True), TIES),
    "sort ints": (lambda L, x: x.sort(descending=True), INTS),
    "argsort": (lambda L, x: L.argsort(x, dim=0), _r(3, 4)),
    "argsort descending": (lambda L, x: x.argsort(descending=True), _r(3, 4)),
    "topk": (lambda L, x: x.topk(2), _r(3, 5)),
    "topk smallest dim 0": (lambda L, x: L.topk(x, 2, dim=0, largest=False), _r(3, 5)),
    "topk zero": (lambda L, x: x.topk(0), _r(3, 5)),
    "cumsum": (lambda L, x: x.cumsum(1), _r(3, 4)),
    "cumsum ints": (lambda L, x: L.cumsum(x, 0), INTS),
    "cumsum bools": (lambda L, x: x.cumsum(1), BOOLS),
    "cumsum dtype": (lambda L, x: x.cumsum(0, dtype=L.float32), _r(3, 4)),
    "cumprod": (lambda L, x: L.cumprod(x, 0), _r(3, 4)),
    "cumprod zeros": (lambda L, x: x.cumprod(1), ZEROS),
    "cumprod ints": (lambda L, x: x.cumprod(1), INTS),
    "prod": (lambda L, x: x.prod(), _r(3, 4)),
    "prod dim keepdim": (lambda L, x: L.prod(x, 1, keepdim=True), _r(3, 4)),
    "prod zeros": (lambda L, x: x.prod(1), ZEROS),
    "prod all zeros": (lambda L, x: x.prod(), ZEROS),
    "prod ints": (lambda L, x: x.prod(0), INTS),
    "prod dtype": (lambda L, x: x.prod(dtype=L.float64), INTS),
    "logsumexp": (lambda L, x: L.logsumexp(x, 1), _r(3, 4)),
    "logsumexp dims keepdim": (lambda L, x: x.logsumexp((0, 1), keepdim=True), _r(3, 4) * 50),
    "logsumexp ints": (lambda L, x: x.logsumexp(0), INTS),
    "norm": (lambda L, x: x.norm(), _r(3, 4)),
    "norm p=1 dim": (lambda L, x: L.norm(x, 1, dim=1), _r(3, 4)),
    "norm inf ties": (lambda L, x: x.norm(float("inf")), TIES),
    "norm -inf dim": (lambda L, x: x.norm(float("-inf"), dim=0), _r(3, 4)),
    "norm p=3 keepdim": (lambda L, x: x.norm(3, dim=1, keepdim=True), _r(3, 4)),
    "norm fro dims": (lambda L, x: L.norm(x, "fro", dim=(1, 2)), _r(2, 3, 4)),
    "norm p=0": (lambda L, x: x.norm(0).detach(), ZEROS),
    "norm of zeros": (lambda L, x: (x * 0).norm(), _r(3, 4)),
    "var correction": (lambda L, x: x.var(1, correction=2), _r(3, 5)),
    "var unbiased positional": (lambda L, x: L.var(x, 0, False), _r(3, 5)),
    "std correction": (lambda L, x: L.std(x, dim=(0, 1), correction=0, keepdim=True), _r(3, 5)),
    "std of constant": (lambda L, x: (x * 0).std(1), _r(3, 5)),
    "amax": (lambda L, x: x.amax(), TIES),
    "amax dims": (lambda L, x: L.amax(x, (0, 1)), _r(2, 3, 4)),
    "amin ties dim": (lambda L, x: x.amin(1, keepdim=True), TIES),
    "amax ints": (lambda L, x: x.amax(1), INTS),
    "all": (lambda L, x: x.all(), BOOLS),
    "any dim": (lambda L, x: L.any(x, 1), BOOLS),
    "all of floats": (lambda L, x: x.all(1), ZEROS),
    "any keepdim": (lambda L, x: x.any(0, keepdim=True), ZEROS),
}


@pytest.mark.parametrize("name", CASES)
def test_matches_pytorch(name):
    pytest.importorskip("torch")
    fn, *arrays = CASES[name]
    compare(fn, *arrays)


ERRORS = {
    "sort dim": (lambda L, x: x.sort(2), _r(3, 4)),
    "topk too many": (lambda L, x: x.topk(5), _r(3, 4)),
    "cumsum dim": (lambda L, x: x.cumsum(5), _r(3, 4)),
    "var of ints": (lambda L, x: x.var(), INTS),
    "std of ints": (lambda L, x: x.std(), INTS),
    "norm of ints": (lambda L, x: x.norm(), INTS),
    "amax of empty": (lambda L, x: x[:0].amax(), _r(3)),
    "inf norm of empty": (lambda L, x: x[:0].norm(float("inf")), _r(3)),
}


@pytest.mark.parametrize("name", ERRORS)
def test_error_matches_pytorch(name):
    pytest.importorskip("torch")
    fn, *arrays = ERRORS[name]
    same_error(fn, *arrays)


def test_sort_and_topk_return_named_pairs():
    x = gv.tensor([[3.0, 1.0, 2.0]], requires_grad=True)
    values, indices = x.sort()
    result = x.topk(2)
    assert result.values.tolist() == [[3.0, 2.0]] and result.indices.tolist() == [[0, 2]]
    assert values.grad_fn.name() == "SortBackward" and result.values.grad_fn.name() == "TopkBackward"
    assert indices.dtype == gv.int64 and not indices.requires_grad and indices.grad_fn is None
    assert repr(result).startswith("torch.return_types.topk(\nvalues=tensor([[3., 2.]]")


def test_sorted_indices_changed_in_place_are_caught_at_backward():
    x = gv.tensor([[3.0, 1.0, 2.0]], requires_grad=True)
    values, indices = x.sort()
    indices.add_(0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        values.sum().backward()


def test_argsort_all_any_never_record_a_node():
    x = gv.tensor([[3.0, 1.0, 2.0]], requires_grad=True)
    for out in (x.argsort(), x.all(), (x > 1).any(1)):
        assert out.grad_fn is None and not out.requires_grad
