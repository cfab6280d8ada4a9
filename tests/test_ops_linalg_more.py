"""Matrix products (every case of torch.matmul, bmm, addmm, baddbmm, dot, outer, einsum) and triangles and
diagonals against PyTorch: values, dtypes, gradients and error text."""

import numpy as np
import pytest

import gradviz as gv

from .oracle_ops import compare, same_error

pytestmark = pytest.mark.oracle


def _r(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


MATMUL_SHAPES = [((3,), (3,)), ((3,), (3, 4)), ((2, 3), (3,)), ((2, 3), (3, 4)), ((5, 2, 3), (3, 4)),
                 ((2, 3), (5, 3, 4)), ((5, 2, 3), (5, 3, 4)), ((2, 1, 2, 3), (5, 3, 4)), ((3,), (5, 3, 4)),
                 ((5, 2, 3), (3,)), ((2, 1, 2, 3), (1, 4, 3, 2)), ((3,), (2, 2, 3, 1)), ((1, 2, 3), (4, 1, 3, 2))]


@pytest.mark.parametrize("shapes", MATMUL_SHAPES, ids=str)
def test_matmul_matches_pytorch(shapes):
    pytest.importorskip("torch")
    sa, sb = shapes
    compare(lambda L, a, b: L.matmul(a, b), _r(*sa), _r(*sb, seed=1))
    compare(lambda L, a, b: a @ b, _r(*sa), _r(*sb, seed=1))


CASES = {
    "matmul ints": (lambda L, a, b: a @ b, np.arange(6).reshape(2, 3), np.arange(6).reshape(3, 2)),
    "bmm": (lambda L, a, b: L.bmm(a, b), _r(2, 3, 4), _r(2, 4, 5, seed=1)),
    "bmm method": (lambda L, a, b: a.bmm(b), _r(1, 3, 4), _r(1, 4, 2, seed=1)),
    "addmm": (lambda L, c, a, b: L.addmm(c, a, b), _r(2, 4), _r(2, 3, seed=1), _r(3, 4, seed=2)),
    "addmm broadcast scaled": (lambda L, c, a, b: c.addmm(a, b, beta=0.5, alpha=-2), _r(4), _r(2, 3, seed=1),
                               _r(3, 4, seed=2)),
    "addmm beta 0 ignores nan": (lambda L, c, a, b: L.addmm(c * float("nan"), a, b, beta=0), _r(2, 4),
                                 _r(2, 3, seed=1), _r(3, 4, seed=2)),
    "addmm_": (lambda L, c, a, b: (c * 1).addmm_(a, b, alpha=2), _r(2, 4), _r(2, 3, seed=1), _r(3, 4, seed=2)),
    "baddbmm": (lambda L, c, a, b: L.baddbmm(c, a, b, beta=2, alpha=0.5), _r(2, 3, 5), _r(2, 3, 4, seed=1),
                _r(2, 4, 5, seed=2)),
    "baddbmm broadcast": (lambda L, c, a, b: c.baddbmm(a, b), _r(3, 1), _r(2, 3, 4, seed=1), _r(2, 4, 5, seed=2)),
    "dot": (lambda L, a, b: L.dot(a, b), _r(4), _r(4, seed=1)),
    "dot ints": (lambda L, a, b: a.dot(b), np.arange(3), np.arange(3)),
    "outer": (lambda L, a, b: L.outer(a, b), _r(3), _r(4, seed=1)),
    "outer mixed dtypes": (lambda L, a, b: a.outer(b), _r(3), np.arange(2)),
    "einsum matmul": (lambda L, a, b: L.einsum("ij,jk->ik", a, b), _r(2, 3), _r(3, 4, seed=1)),
    "einsum implicit": (lambda L, a, b: L.einsum("ij,kj", a, b), _r(2, 3), _r(4, 3, seed=1)),
    "einsum trace": (lambda L, a: L.einsum("ii", a), _r(3, 3)),
    "einsum diagonal": (lambda L, a: L.einsum("ii->i", a), _r(3, 3)),
    "einsum ellipsis": (lambda L, a, b: L.einsum("...ij,...jk->...ik", a, b), _r(2, 2, 3), _r(2, 3, 4, seed=1)),
    "einsum ellipsis broadcast": (lambda L, a, b: L.einsum("...j,j->...", a, b), _r(2, 3, 4), _r(4, seed=1)),
    "einsum three operands": (lambda L, a, b, c: L.einsum("ij,jk,kl->il", a, b, c), _r(2, 3), _r(3, 4, seed=1),
                              _r(4, 2, seed=2)),
    "einsum list": (lambda L, a, b: L.einsum("bi,bi->b", [a, b]), _r(2, 3), _r(2, 3, seed=1)),
    "einsum size-1 broadcast": (lambda L, a, b: L.einsum("ij,jk->ik", a, b), _r(2, 1), _r(3, 4, seed=1)),
    "einsum attention": (lambda L, q, k: L.einsum("bhqd,bhkd->bhqk", q, k).softmax(-1), _r(2, 2, 3, 4),
                         _r(2, 2, 5, 4, seed=1)),
    "tril": (lambda L, x: x.tril(), _r(3, 4)),
    "tril batched offset": (lambda L, x: L.tril(x, -1), _r(2, 3, 4)),
    "triu": (lambda L, x: L.triu(x, 1), _r(3, 4)),
    "triu ints": (lambda L, x: x.triu(), np.arange(9).reshape(3, 3)),
    "tril_": (lambda L, x: (x * 1).tril_(1), _r(3, 3)),
    "triu_": (lambda L, x: (x * 1).triu_(), _r(3, 3)),
    "diag of vector": (lambda L, x: L.diag(x), _r(3)),
    "diag of vector offset": (lambda L, x: x.diag(-2), _r(3)),
    "diag of matrix": (lambda L, x: L.diag(x, 1), _r(3, 4)),
    "trace": (lambda L, x: x.trace(), _r(3, 4)),
    "trace ints": (lambda L, x: x.trace(), np.arange(9).reshape(3, 3)),
}


@pytest.mark.parametrize("name", CASES)
def test_matches_pytorch(name):
    pytest.importorskip("torch")
    fn, *arrays = CASES[name]
    compare(fn, *arrays)


ERRORS = {
    "matmul 0-d": (lambda L, a, b: a @ b, np.array(1.0), _r(3)),
    "matmul 1-D sizes": (lambda L, a, b: a @ b, _r(3), _r(4)),
    "matmul 1-D by matrix": (lambda L, a, b: a @ b, _r(3), _r(4, 2)),
    "matmul matrix by vector": (lambda L, a, b: a @ b, _r(2, 3), _r(4)),
    "matmul matrices": (lambda L, a, b: L.matmul(a, b), _r(2, 3), _r(4, 5)),
    "matmul batches": (lambda L, a, b: a @ b, _r(2, 2, 3), _r(2, 4, 5)),
    "matmul batch broadcast": (lambda L, a, b: a @ b, _r(2, 2, 3), _r(3, 3, 5)),
    "matmul dtypes": (lambda L, a, b: a @ b.float(), _r(2, 3), _r(3, 2)),
    "dot dtypes": (lambda L, a, b: a @ b.float(), _r(3), _r(3)),
    "bmm rank": (lambda L, a, b: L.bmm(a, b), _r(3, 4), _r(4, 5)),
    "bmm sizes": (lambda L, a, b: L.bmm(a, b), _r(2, 3, 4), _r(3, 4, 5)),
    "bmm dtypes": (lambda L, a, b: L.bmm(a, b.float()), _r(2, 3, 4), _r(2, 4, 5)),
    "addmm dtypes": (lambda L, c, a, b: L.addmm(c.float(), a, b), _r(2, 2), _r(2, 3), _r(3, 2)),
    "addmm shapes": (lambda L, c, a, b: L.addmm(c, a, b), _r(2, 2), _r(2, 3), _r(4, 2)),
    "dot rank": (lambda L, a, b: L.dot(a, b), _r(2, 3), _r(2, 3)),
    "dot sizes": (lambda L, a, b: L.dot(a, b), _r(4), _r(3)),
    "outer rank": (lambda L, a, b: L.outer(a, b), _r(2, 3), _r(3)),
    "einsum sizes": (lambda L, a, b: L.einsum("ij,jk", a, b), _r(3, 4), _r(3, 4)),
    "einsum too many operands": (lambda L, a, b: L.einsum("ij", a, b), _r(3, 4), _r(3, 4)),
    "einsum too few operands": (lambda L, a: L.einsum("ij,jk", a), _r(3, 4)),
    "einsum subscripts": (lambda L, a: L.einsum("ijk", a), _r(3, 4)),
    "einsum dtypes": (lambda L, a, b: L.einsum("ij,ij", a, b.float()), _r(3, 4), _r(3, 4)),
    "bool matmul": (lambda L, a: a @ a, np.ones((3, 3), dtype=bool)),
    "bool vector dot": (lambda L, a: a[0] @ a[0], np.ones((3, 3), dtype=bool)),
    "bool matrix by vector": (lambda L, a: a @ a[0], np.ones((3, 3), dtype=bool)),
    "bool batched matmul": (lambda L, a: a[None] @ a[None], np.ones((3, 3), dtype=bool)),
    "bool bmm": (lambda L, a: L.bmm(a[None], a[None]), np.ones((3, 3), dtype=bool)),
    "bool baddbmm": (lambda L, a: L.baddbmm(a[None], a[None], a[None]), np.ones((3, 3), dtype=bool)),
    "bool einsum": (lambda L, a: L.einsum("ij,jk", a, a), np.ones((3, 3), dtype=bool)),
    "bool trace": (lambda L, a: a.trace(), np.ones((3, 3), dtype=bool)),
    "bool topk": (lambda L, a: a.topk(2), np.ones((3, 3), dtype=bool)),
    "tril of a vector": (lambda L, x: x.tril(), _r(3)),
    "trace of a batch": (lambda L, x: x.trace(), _r(2, 3, 4)),
}


@pytest.mark.parametrize("name", ERRORS)
def test_error_matches_pytorch(name):
    pytest.importorskip("torch")
    fn, *arrays = ERRORS[name]
    same_error(fn, *arrays)


def test_matrix_trace_is_a_method_not_the_debuggers_trace():
    x = gv.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert x.trace().item() == 5.0
    assert not hasattr(gv.functions, "trace")


def test_what_gradviz_does_not_do_says_so_in_one_line():
    x = gv.ones(2, 2)
    with pytest.raises(NotImplementedError, match=r"sublist form"):
        gv.einsum(x, [0, 1], x, [1, 2])
    with pytest.raises(NotImplementedError, match=r"norm supports p = 'fro', 1, 2, inf, -inf, 0"):
        x.norm("nuc")
    with pytest.raises(NotImplementedError, match=r"reduce='multiply'"):
        x.scatter(0, gv.tensor([[0, 1]]), 2.0, reduce="multiply")
