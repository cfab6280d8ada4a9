"""inference_mode, isclose, nonzero, unique, meshgrid, finfo/iinfo: values and errors against PyTorch."""

import numpy as np
import pytest

import gradviz as gv


def _torch():
    return pytest.importorskip("torch")


def _same(got, expected):
    np.testing.assert_array_equal(got.numpy(), expected.numpy())
    assert str(got.dtype) == str(expected.dtype).replace("torch.", "")
    assert tuple(got.shape) == tuple(expected.shape)


# ----- inference_mode ------------------------------------------------------------------------------------------
def test_inference_mode_records_no_graph_and_restores():
    w = gv.ones(2, requires_grad=True)
    with gv.inference_mode():
        assert gv.is_inference_mode_enabled() and not gv.is_grad_enabled()
        y = w * 2
    assert y.requires_grad is False and y.grad_fn is None
    assert gv.is_grad_enabled() and not gv.is_inference_mode_enabled()
    assert (w * 2).requires_grad


def test_inference_mode_false_leaves_grad_mode_alone():
    w = gv.ones(2, requires_grad=True)
    with gv.inference_mode(False):
        assert (w * 2).requires_grad
    with gv.no_grad(), gv.inference_mode(False):
        assert not (w * 2).requires_grad


def test_inference_mode_decorates_with_and_without_parentheses():
    w = gv.ones(2, requires_grad=True)

    @gv.inference_mode()
    def f():
        return w * 2

    @gv.inference_mode
    def g():
        return w * 3

    assert f().requires_grad is False and g().requires_grad is False and g.__name__ == "g"
    assert (w * 2).requires_grad


# ----- isclose -------------------------------------------------------------------------------------------------
@pytest.mark.oracle
@pytest.mark.parametrize("kwargs", [{}, {"rtol": 0.1}, {"atol": 0.2}, {"equal_nan": True}])
def test_isclose_matches_torch(kwargs):
    torch = _torch()
    a = [1.0, 2.0, float("nan"), float("inf"), -float("inf"), 1e-9]
    b = [1.0, 2.15, float("nan"), float("inf"), float("inf"), 0.0]
    _same(gv.isclose(gv.tensor(a), gv.tensor(b), **kwargs), torch.isclose(torch.tensor(a), torch.tensor(b), **kwargs))
    _same(gv.tensor(a).isclose(gv.tensor(b), **kwargs), torch.tensor(a).isclose(torch.tensor(b), **kwargs))
    _same(gv.isclose(gv.tensor([1, 2]), gv.tensor([1, 3])), torch.isclose(torch.tensor([1, 2]), torch.tensor([1, 3])))


@pytest.mark.oracle
@pytest.mark.parametrize("args", [("t", "long"), ("t", 1.0), ("rtol",)])
def test_isclose_errors_match_torch(args):
    torch = _torch()

    def run(lib):
        x = lib.tensor([1.0])
        if args == ("t", "long"):
            return lib.isclose(x, lib.tensor([1]))
        if args == ("t", 1.0):
            return lib.isclose(x, 1.0)
        return lib.isclose(x, x, rtol=-1)

    with pytest.raises(Exception) as expected:
        run(torch)
    with pytest.raises(type(expected.value)) as got:
        run(gv)
    assert str(got.value) == str(expected.value)


# ----- nonzero -------------------------------------------------------------------------------------------------
@pytest.mark.oracle
@pytest.mark.parametrize("data", [[[1, 0], [2, 3]], [0, 0, 1.5], 5, 0, [[[True, False]], [[False, True]]], []])
def test_nonzero_matches_torch(data):
    torch = _torch()
    _same(gv.nonzero(gv.tensor(data)), torch.nonzero(torch.tensor(data)))
    _same(gv.tensor(data).nonzero(), torch.tensor(data).nonzero())
    got, expected = gv.tensor(data).nonzero(as_tuple=True), torch.nonzero(torch.tensor(data), as_tuple=True)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        _same(g, e)


# ----- unique --------------------------------------------------------------------------------------------------
@pytest.mark.oracle
@pytest.mark.parametrize("data, dim", [([3, 1, 3, 2, 1], None), ([[2.0, 1.0], [2.0, -1.0]], None),
                                       ([[3, 1], [3, 1], [0, 2]], 0), ([[3, 1, 3], [0, 2, 0]], 1),
                                       ([[3, 1, 3], [0, 2, 0]], -1), ([True, False, True], None)])
@pytest.mark.parametrize("inverse, counts", [(False, False), (True, False), (False, True), (True, True)])
def test_unique_matches_torch(data, dim, inverse, counts):
    torch = _torch()
    got = gv.unique(gv.tensor(data), return_inverse=inverse, return_counts=counts, dim=dim)
    expected = torch.unique(torch.tensor(data), return_inverse=inverse, return_counts=counts, dim=dim)
    if not (inverse or counts):
        got, expected = (got,), (expected,)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        _same(g, e)
    _same(gv.tensor(data).unique(dim=dim) if dim is not None else gv.tensor(data).unique(sorted=False),
          torch.tensor(data).unique(dim=dim) if dim is not None else torch.tensor(data).unique(sorted=False))


def test_unique_dim_out_of_range():
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)"):
        gv.unique(gv.ones(2, 2), dim=2)


# ----- meshgrid ------------------------------------------------------------------------------------------------
@pytest.mark.oracle
@pytest.mark.parametrize("indexing", ["ij", "xy"])
@pytest.mark.parametrize("sizes", [(3, 2), (2, 3, 4), (4,), (0, 2)])
def test_meshgrid_matches_torch(indexing, sizes):
    torch = _torch()
    inputs = [np.arange(n, dtype=np.float32) + 10 * i for i, n in enumerate(sizes)]
    got = gv.meshgrid(*[gv.tensor(a) for a in inputs], indexing=indexing)
    expected = torch.meshgrid(*[torch.tensor(a) for a in inputs], indexing=indexing)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        _same(g, e)
    listed = gv.meshgrid([gv.tensor(a) for a in inputs], indexing=indexing)
    for g, e in zip(listed, expected):
        _same(g, e)


@pytest.mark.oracle
def test_meshgrid_gradient_matches_torch():
    torch = _torch()
    a, b = np.array([1.0, 2.0, 3.0]), np.array([4.0, 5.0])
    ga, gb = gv.tensor(a, requires_grad=True), gv.tensor(b, requires_grad=True)
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    gx, gy = gv.meshgrid(ga, gb, indexing="xy")
    tx, ty = torch.meshgrid(ta, tb, indexing="xy")
    ((gx * gy) ** 2 + gx).sum().backward()
    ((tx * ty) ** 2 + tx).sum().backward()
    np.testing.assert_allclose(ga.grad.numpy(), ta.grad.numpy())
    np.testing.assert_allclose(gb.grad.numpy(), tb.grad.numpy())


@pytest.mark.oracle
@pytest.mark.parametrize("call", ["bad_indexing", "two_dims", "empty", "dtypes"])
def test_meshgrid_errors_match_torch(call):
    torch = _torch()

    def run(lib):
        if call == "bad_indexing":
            return lib.meshgrid(lib.ones(2), lib.ones(3), indexing="zz")
        if call == "empty":
            return lib.meshgrid([], indexing="ij")
        if call == "dtypes":
            return lib.meshgrid(lib.ones(2), lib.ones(3, dtype=lib.float64), indexing="ij")
        return lib.meshgrid(lib.ones(2, 2), lib.ones(3), indexing="ij")

    with pytest.raises(RuntimeError) as expected:
        run(torch)
    with pytest.raises(RuntimeError) as got:
        run(gv)
    if call == "two_dims":  # PyTorch prints the tensor itself after the colon
        assert str(got.value).startswith("torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got: ")
    else:
        assert str(got.value) == str(expected.value)


# ----- finfo / iinfo -------------------------------------------------------------------------------------------
@pytest.mark.oracle
@pytest.mark.parametrize("name", ["float32", "float64"])
def test_finfo_matches_torch(name):
    torch = _torch()
    got, expected = gv.finfo(getattr(gv, name)), torch.finfo(getattr(torch, name))
    for attr in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution"):
        assert getattr(got, attr) == getattr(expected, attr), attr
    assert repr(got) == repr(expected).replace("torch.", "")


@pytest.mark.oracle
def test_finfo_default_is_the_default_float():
    torch = _torch()
    assert gv.finfo().eps == torch.finfo().eps
    gv.set_default_dtype(gv.float64)
    try:
        assert gv.finfo().bits == 64
    finally:
        gv.set_default_dtype(gv.float32)


@pytest.mark.oracle
@pytest.mark.parametrize("name", ["int64", "int32", "uint8"])
def test_iinfo_matches_torch(name):
    torch = _torch()
    got, expected = gv.iinfo(getattr(gv, name)), torch.iinfo(getattr(torch, name))
    assert (got.bits, got.min, got.max) == (expected.bits, expected.min, expected.max)
    assert repr(got) == repr(expected).replace("torch.", "")


@pytest.mark.oracle
@pytest.mark.parametrize("fn, dtype", [("finfo", "int64"), ("iinfo", "float32"), ("iinfo", "bool")])
def test_info_errors_match_torch(fn, dtype):
    torch = _torch()
    with pytest.raises(TypeError) as expected:
        getattr(torch, fn)(getattr(torch, dtype))
    with pytest.raises(TypeError) as got:
        getattr(gv, fn)(getattr(gv, dtype))
    assert str(got.value) == str(expected.value)
