"""PyTorch's dtype rules in the new ops, over a grid of dtypes: what each op gives (or refuses) for bool,
integer and float inputs, and what cat/stack/outer give for every pair of dtypes."""

import itertools

import numpy as np
import pytest

import gradviz as gv

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.oracle

DTYPES = ["bool", "uint8", "int32", "int64", "float32", "float64"]
BASE = np.array([[0.0, 2.0, 1.0], [3.0, 0.0, 1.0], [1.0, 1.0, 2.0]])

UNARY = {
    "sort": lambda L, x: x.sort(1)[0],
    "sort indices": lambda L, x: x.sort(0, descending=True)[1],
    "argsort": lambda L, x: x.argsort(1),
    "topk": lambda L, x: x.topk(2)[0],
    "cumsum": lambda L, x: x.cumsum(1),
    "cumprod": lambda L, x: L.cumprod(x, 0),
    "prod": lambda L, x: x.prod(),
    "prod dim": lambda L, x: x.prod(1),
    "amax": lambda L, x: x.amax(1),
    "amin": lambda L, x: L.amin(x),
    "all": lambda L, x: x.all(1),
    "any": lambda L, x: L.any(x),
    "flip": lambda L, x: x.flip(0),
    "roll": lambda L, x: x.roll(1, 1),
    "repeat": lambda L, x: x.repeat(1, 2),
    "repeat_interleave": lambda L, x: x.repeat_interleave(2, dim=0),
    "narrow": lambda L, x: x.narrow(1, 1, 2),
    "unbind": lambda L, x: x.unbind(1)[0],
    "movedim": lambda L, x: x.movedim(0, 1),
    "gather": lambda L, x: x.gather(1, L.tensor([[0], [2], [1]])),
    "index_select": lambda L, x: x.index_select(0, L.tensor([2, 2])),
    "take_along_dim": lambda L, x: L.take_along_dim(x, L.tensor([[1, 0, 2]]), 0),
    "diag": lambda L, x: x.diag(),
    "diagonal": lambda L, x: x.diagonal(),
    "tril": lambda L, x: x.tril(),
    "triu": lambda L, x: L.triu(x, 1),
    "trace": lambda L, x: x.trace(),
    "logsumexp": lambda L, x: x.logsumexp(1),
    "norm": lambda L, x: x.norm(),
    "var": lambda L, x: x.var(),
    "std": lambda L, x: x.std(1, correction=0),
    "matmul": lambda L, x: x @ x,
    "bmm": lambda L, x: L.bmm(x[None], x[None]),
    "dot": lambda L, x: L.dot(x[0], x[1]),
    "einsum": lambda L, x: L.einsum("ij,jk->ik", x, x),
    "scatter_add": lambda L, x: x.scatter_add(1, L.tensor([[0], [0], [2]]), x[:, :1]),
    "index_add": lambda L, x: x.index_add(0, L.tensor([0, 0]), x[:2]),
}


def _run(lib, fn, dtype):
    x = lib.tensor(BASE).to(getattr(lib, dtype) if dtype != "bool" else lib.bool)
    try:
        return fn(lib, x), None
    except Exception as err:  # noqa: BLE001 - compared below
        return None, err


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", UNARY)
def test_single_input_dtypes_match_pytorch(name, dtype):
    ours, our_err = _run(gv, UNARY[name], dtype)
    theirs, their_err = _run(torch, UNARY[name], dtype)
    if their_err is not None:
        assert our_err is not None, f"torch refuses ({their_err}) but gradviz gave {ours!r}"
        return
    assert our_err is None, our_err
    assert str(ours.dtype) == str(theirs.dtype).replace("torch.", "")
    np.testing.assert_allclose(ours.numpy().astype(np.float64), theirs.numpy().astype(np.float64), rtol=1e-6)


PAIRS = {
    "cat": lambda L, a, b: L.cat([a, b]),
    "stack": lambda L, a, b: L.stack([a, b], 1),
    "outer": lambda L, a, b: L.outer(a, b),
}


@pytest.mark.parametrize("pair", list(itertools.product(DTYPES, repeat=2)), ids="-".join)
@pytest.mark.parametrize("name", PAIRS)
def test_two_input_dtypes_match_pytorch(name, pair):
    results = []
    for lib in (gv, torch):
        a, b = (lib.tensor(BASE[0]).to(getattr(lib, d) if d != "bool" else lib.bool) for d in pair)
        results.append(PAIRS[name](lib, a, b))
    ours, theirs = results
    assert str(ours.dtype) == str(theirs.dtype).replace("torch.", "")
    np.testing.assert_allclose(ours.numpy().astype(np.float64), theirs.numpy().astype(np.float64))
