"""``out=`` on torch-namespace ops under the shim (gradviz/out_arg.py), against PyTorch."""

import warnings

import numpy as np
import pytest

import gradviz as gv
from gradviz.cli.torch_shim import TorchShim
from gradviz.errors import UnsupportedError
from gradviz.out_arg import with_out


@pytest.fixture
def real_torch():
    """PyTorch itself, imported before the shim is installed (the shim would answer ``import torch``)."""
    torch = pytest.importorskip("torch")
    assert hasattr(torch, "_C"), "the shim answered: PyTorch must be imported first"
    return torch


@pytest.fixture
def shim_torch():
    with TorchShim():
        import torch

        yield torch


def _calls(lib):
    """(name, call) pairs: each call writes its result into an out tensor it makes, and returns (out, result)."""
    x = lib.tensor([[1.0, -2.0], [3.0, 0.5]])

    def run(fn, *args, out):
        return out, fn(*args, out=out)

    return {
        "add": lambda: run(lib.add, x, x, out=lib.empty(2, 2)),
        "add alpha": lambda: (lambda o: (o, lib.add(x, x, alpha=2, out=o)))(lib.empty(2, 2)),
        "mul": lambda: run(lib.mul, x, 3, out=lib.empty(2, 2)),
        "matmul": lambda: run(lib.matmul, x, x, out=lib.empty(2, 2)),
        "cat resized from empty": lambda: run(lib.cat, [x, x], out=lib.empty(0)),
        "stack": lambda: run(lib.stack, [x, x], out=lib.empty(2, 2, 2)),
        "exp": lambda: run(lib.exp, x, out=lib.empty(2, 2)),
        "sum dim": lambda: (lambda o: (o, lib.sum(x, 1, out=o)))(lib.empty(2)),
        "int into float": lambda: run(lib.add, lib.tensor([1, 2]), 1, out=lib.empty(2)),
        "arange": lambda: run(lib.arange, 4, out=lib.empty(4, dtype=lib.long)),
        "zeros": lambda: run(lib.zeros, 3, out=lib.empty(3)),
    }


@pytest.mark.oracle
@pytest.mark.parametrize("name", list(_calls(gv)))
def test_out_matches_torch(real_torch, name):
    exp_out, expected = _calls(real_torch)[name]()  # before the shim: PyTorch imports its own modules lazily
    with TorchShim():
        import torch

        got_out, got = _calls(torch)[name]()
    assert got is got_out and expected is exp_out  # the op returns out itself
    np.testing.assert_allclose(got_out.numpy(), exp_out.numpy(), rtol=1e-6)  # exp: last-ulp differences
    assert str(got_out.dtype).replace("torch.", "") == str(exp_out.dtype).replace("torch.", "")


@pytest.mark.oracle
def test_tuple_out_for_sort(shim_torch):
    values, indices = shim_torch.empty(3), shim_torch.empty(3, dtype=shim_torch.long)
    result = shim_torch.sort(shim_torch.tensor([2.0, 0.5, 1.0]), out=(values, indices))
    assert result[0] is values and result[1] is indices
    assert values.tolist() == [0.5, 1.0, 2.0] and indices.tolist() == [1, 2, 0]


def test_out_bumps_the_version_and_keeps_identity(shim_torch):
    r = shim_torch.zeros(2)
    before = r._version
    assert shim_torch.add(shim_torch.ones(2), 1, out=r) is r
    assert r.tolist() == [2.0, 2.0] and r._version > before


@pytest.mark.oracle
@pytest.mark.parametrize("case", ["requires_grad input", "requires_grad out", "cast down", "not a tensor"])
def test_errors_match_torch(real_torch, case):
    real = real_torch

    def run(lib):
        if case == "requires_grad input":
            return lib.add(lib.ones(2, requires_grad=True), 1, out=lib.empty(2))
        if case == "requires_grad out":
            return lib.mul(lib.ones(2), 2, out=lib.empty(2, requires_grad=True))
        if case == "cast down":
            return lib.add(lib.ones(2), 1.5, out=lib.empty(2, dtype=lib.long))
        return lib.add(lib.ones(2), 1, out=[1, 2])

    with pytest.raises((RuntimeError, TypeError)) as expected:
        run(real)
    with TorchShim(), pytest.raises(type(expected.value)) as got:
        import torch

        run(torch)
    if case != "not a tensor":  # PyTorch's argument-parser text lists every overload
        assert str(got.value) == str(expected.value)


def test_requires_grad_is_fine_under_no_grad(shim_torch):
    r = shim_torch.empty(2)
    with shim_torch.no_grad():
        shim_torch.add(shim_torch.ones(2, requires_grad=True), 1, out=r)
    assert r.tolist() == [2.0, 2.0]


def test_resizing_a_nonempty_out_warns_as_pytorch(shim_torch):
    r = shim_torch.empty(3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        shim_torch.add(shim_torch.ones(2), 1, out=r)
    assert tuple(r.shape) == (2,)
    assert [str(w.message) for w in caught] == [
        "An output with one or more elements was resized since it had shape [3], which does not match the "
        "required output shape [2]. This behavior is deprecated, and in a future PyTorch release outputs will not "
        "be resized unless they have zero elements. You can explicitly reuse an out tensor t by resizing it, "
        "inplace, to zero elements with t.resize_(0)."]


def test_a_view_of_another_shape_is_refused_in_one_line():
    base = gv.zeros(2, 3)
    with pytest.raises(UnsupportedError) as err:
        with_out(gv.add)(gv.ones(4), 1, out=base[0])
    assert err.value.torch_name == "out="


def test_non_tensor_results_reject_out():
    with pytest.raises(TypeError, match=r"^is_tensor\(\) got an unexpected keyword argument 'out'$"):
        with_out(gv.is_tensor)(gv.ones(1), out=gv.ones(1))
