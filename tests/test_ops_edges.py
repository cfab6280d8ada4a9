"""Edge cases of the new ops against PyTorch: 0-d and empty tensors, offsets past the end, NaN in sorts,
infinities, repeated zeros, ties, integer inputs and mixed dtypes."""

import numpy as np
import pytest

from .oracle_ops import compare, same_error

pytestmark = pytest.mark.oracle


def _r(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


EDGES = {
    "cumsum 0-d": (lambda L, x: x.cumsum(0), np.array(2.0)),
    "cumprod 0-d": (lambda L, x: x.cumprod(-1), np.array(2.0)),
    "prod 0-d dim": (lambda L, x: x.prod(0), np.array(2.0)),
    "sort 0-d": (lambda L, x: x.sort(), np.array(2.0)),
    "sort empty": (lambda L, x: x.sort(), np.zeros((2, 0))),
    "topk empty": (lambda L, x: x.topk(0), np.zeros((2, 0))),
    "cumsum empty": (lambda L, x: x.cumsum(1), np.zeros((2, 0))),
    "cumprod empty": (lambda L, x: x.cumprod(1), np.zeros((2, 0))),
    "prod empty": (lambda L, x: x.prod(1), np.zeros((2, 0))),
    "logsumexp empty": (lambda L, x: x.logsumexp(1), np.zeros((2, 0))),
    "norm empty": (lambda L, x: x.norm(), np.zeros((2, 0))),
    "diag big offset": (lambda L, x: x.diag(5), _r(3, 4)),
    "diagonal big offset": (lambda L, x: x.diagonal(5), _r(3, 4)),
    "split dim size 0": (lambda L, x: x.split(2, 1), np.zeros((2, 0))),
    "chunk empty": (lambda L, x: x.chunk(2, 1), np.zeros((2, 0))),
    "unbind 1-d": (lambda L, x: x.unbind(), _r(3)),
    "flip 0-d": (lambda L, x: x.flip(0), np.array(2.0)),
    "roll 0 shift": (lambda L, x: x.roll(0, 0), _r(2,3)),
    "repeat 0": (lambda L, x: x.repeat(0, 2), _r(2,3)),
    "repeat 0-d": (lambda L, x: x.repeat(2, 3), np.array(2.0)),
    "tile 0-d": (lambda L, x: x.tile(3), np.array(2.0)),
    "amax 0-d": (lambda L, x: x.amax(), np.array(2.0)),
    "amax 0-d dim": (lambda L, x: x.amax(0), np.array(2.0)),
    "all 0-d": (lambda L, x: x.all(), np.array(2.0)),
    "norm 0-d": (lambda L, x: x.norm(), np.array(-2.0)),
    "std 0-d": (lambda L, x: x.std(), np.array(-2.0)),
    "std one elem": (lambda L, x: x.std(0), _r(1, 3)),
    "var one elem": (lambda L, x: x.var(0), _r(1, 3)),
    "movedim 0-d": (lambda L, x: x.movedim(0, 0), np.array(2.0)),
    "narrow 0 length": (lambda L, x: x.narrow(0, 1, 0), _r(2, 3)),
    "gather 1-d": (lambda L, x, i: x.gather(0, i), _r(4), np.array([3, 0])),
    "gather 0-d idx on 1-d": (lambda L, x, i: x.gather(0, i), _r(4), np.array(2)),
    "index_select 0-d idx": (lambda L, x, i: x.index_select(0, i), _r(4, 2), np.array(2)),
    "scatter_add 1-d": (lambda L, x, i, s: x.scatter_add(0, i, s), _r(4), np.array([1, 1, 3]), _r(3)),
    "index_add 1-d": (lambda L, x, i, s: x.index_add(0, i, s), _r(4), np.array([1, 1, 3]), _r(3)),
    "einsum outer implicit": (lambda L, a, b: L.einsum("i,j", a, b), _r(2), _r(3)),
    "einsum transpose out": (lambda L, a: L.einsum("ij->ji", a), _r(2, 3)),
    "einsum batch diag": (lambda L, a: L.einsum("bii->bi", a), _r(2, 3, 3)),
    "einsum ellipsis middle": (lambda L, a: L.einsum("i...j->ji...", a), _r(2, 3, 4, 5)),
    "einsum ellipsis no out": (lambda L, a, b: L.einsum("...i,...i", a, b), _r(2, 3), _r(3,)),
    "einsum spaces": (lambda L, a, b: L.einsum("i j , j k -> i k", a, b), _r(2, 3), _r(3, 2)),
    "take_along_dim neg dim": (lambda L, x, i: L.take_along_dim(x, i, -1), _r(3, 4), np.array([[1], [3], [0]])),
    "repeat_interleave tensor single": (lambda L, x, r_: x.repeat_interleave(r_, dim=0), _r(3, 2), np.array([2])),
    "repeat_interleave counts only": (lambda L, c: L.repeat_interleave(c), np.array([1, 0, 2])),
    "norm dim negative": (lambda L, x: x.norm(dim=-1), _r(3, 4)),
    "norm p=2 dim tuple": (lambda L, x: x.norm(2, dim=(0, 1)), _r(3, 4)),
    "prod neg dim": (lambda L, x: x.prod(-1), _r(3, 4)),
    "cumsum bool dtype": (lambda L, x: x.cumsum(0), np.array([True, True])),
    "logsumexp neg inf": (lambda L, x: (x * float("inf") * -1).logsumexp(0), np.abs(_r(3)) + 1),
    "sort nan": (lambda L, x: x.sort(), np.array([1.0, np.nan, 0.0])),
    "sort nan desc": (lambda L, x: x.sort(descending=True), np.array([1.0, np.nan, 0.0])),
    "topk nan": (lambda L, x: x.topk(2), np.array([1.0, np.nan, 0.0])),
    "outer ints": (lambda L, a, b: L.outer(a, b), np.arange(3), np.arange(2)),
    "cat float32 and float64": (lambda L, a, b: L.cat([a.float(), b]), _r(2, 2), _r(1, 2)),
    "diag_embed of ints": (lambda L, a: L.diag(a), np.arange(3)),
    "addmm ints": (lambda L, c, a, b: L.addmm(c, a, b), np.ones((2, 2), dtype=np.int64),
                   np.ones((2, 3), dtype=np.int64), np.ones((3, 2), dtype=np.int64)),
    "amax ties all": (lambda L, x: x.amax(), np.ones((2, 2))),
    "max ties old": (lambda L, x: x.max(), np.ones((2, 2))),
    "cumprod two zeros": (lambda L, x: x.cumprod(0), np.array([2.0, 0.0, 3.0, 0.0, 4.0])),
    "prod two zeros": (lambda L, x: x.prod(), np.array([2.0, 0.0, 3.0, 0.0, 4.0])),
}

EDGES["cat legacy empty"] = (lambda L, e, x: L.cat([e, x, e], 1), np.zeros(0), _r(2, 3))
EDGES["cat legacy empty promotes"] = (lambda L, e, i: L.cat([e, i]), np.zeros(0), np.ones((2, 2), dtype=np.int64))
EDGES["cat only empties"] = (lambda L, e: L.cat([e, e * 2]), np.zeros(0))
EDGES["sum 0-d dim"] = (lambda L, x: x.sum(0, keepdim=True), np.array(2.0))
EDGES["all 0-d dim"] = (lambda L, x: x.all(0), np.array(2.0))
EDGES["logsumexp 0-d dim"] = (lambda L, x: x.logsumexp(-1), np.array(2.0))
EDGES["norm 0-d dim"] = (lambda L, x: x.norm(dim=0), np.array(-2.0))
EDGES["std 0-d dim"] = (lambda L, x: x.std(0, correction=0), np.array(-2.0))
EDGES["index_select 0-d input"] = (lambda L, x, i: x.index_select(0, i), np.array(2.0), np.array([0]))
EDGES["index_select 0-d input and index"] = (lambda L, x, i: x.index_select(0, i), np.array(2.0), np.array(0))


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("name", EDGES)
def test_edge_case_matches_pytorch(name):
    pytest.importorskip("torch")
    fn, *arrays = EDGES[name]
    compare(fn, *arrays)


def test_index_select_of_a_0d_tensor_takes_one_index():
    pytest.importorskip("torch")
    same_error(lambda L, x, i: x.index_select(0, i), np.array(2.0), np.array([0, 0]))


NODES = {
    "narrow": lambda L, x: x.narrow(0, 0, 1),
    "split": lambda L, x: x.split(1)[0],
    "split sizes": lambda L, x: x.split([1, 2])[1],
    "unbind": lambda L, x: x.unbind()[0],
    "diagonal": lambda L, x: x.diagonal(),
    "movedim": lambda L, x: x.movedim(0, 1),
    "repeat": lambda L, x: x.repeat(2, 1),
    "flip": lambda L, x: x.flip(0),
    "roll": lambda L, x: x.roll(1),
    "gather": lambda L, x: x.gather(0, L.tensor([[0, 1, 2]])),
    "scatter": lambda L, x: x.scatter(0, L.tensor([[0, 1, 2]]), 1.0),
    "scatter_add": lambda L, x: x.scatter_add(0, L.tensor([[0, 1, 2]]), x),
    "index_select": lambda L, x: x.index_select(0, L.tensor([0])),
    "index_add": lambda L, x: x.index_add(0, L.tensor([0]), x[:1]),
    "sort": lambda L, x: x.sort()[0],
    "topk": lambda L, x: x.topk(1)[0],
    "cumsum": lambda L, x: x.cumsum(0),
    "cumprod": lambda L, x: x.cumprod(0),
    "prod": lambda L, x: x.prod(),
    "logsumexp": lambda L, x: x.logsumexp(0),
    "norm": lambda L, x: x.norm(1),
    "std": lambda L, x: x.std(),
    "var": lambda L, x: x.var(correction=0),
    "amax": lambda L, x: x.amax(),
    "amin": lambda L, x: x.amin(0),
    "bmm": lambda L, x: L.bmm(x[None], x[None]),
    "addmm": lambda L, x: L.addmm(x, x, x),
    "baddbmm": lambda L, x: L.baddbmm(x, x[None], x[None]),
    "dot": lambda L, x: L.dot(x[0], x[1]),
    "tril": lambda L, x: x.tril(),
    "triu": lambda L, x: x.triu(),
    "trace": lambda L, x: x.trace(),
    "normal": lambda L, x: L.normal(x, 1.0),
    "bernoulli": lambda L, x: L.bernoulli(x.sigmoid()),
}


@pytest.mark.parametrize("name", NODES)
def test_node_names_are_pytorchs(name):
    torch = pytest.importorskip("torch")
    import gradviz as gv

    names = []
    for lib in (gv, torch):
        x = lib.tensor(_r(3, 3), requires_grad=True)
        names.append(NODES[name](lib, x).grad_fn.name().rstrip("0123456789"))
    assert names[0] == names[1]
