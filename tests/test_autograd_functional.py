"""autograd.functional.jacobian and vjp against PyTorch's, and against central differences."""

import numpy as np
import pytest

import gradviz as gv
from gradviz.autograd.functional import jacobian, vjp
from gradviz.errors import UnsupportedError

X = np.array([[0.5, -1.0, 2.0], [1.5, 0.3, -0.7]])
Y = np.array([0.2, -0.4, 1.1])


def _funcs(lib):
    return {
        "square": (lambda x: x ** 2 * x.sin(), (X,)),
        "matrix": (lambda x, y: (x * y).tanh() @ y, (X, Y)),
        "two outputs": (lambda x, y: ((x * y).exp(), x.sum()), (X, Y)),
        "unused input": (lambda x, y: x * 2, (X, Y)),
        "constant": (lambda x: lib.ones(2), (Y[:2],)),
        "scalar": (lambda x: (x ** 3).sum(), (Y,)),
    }


def _flatten(value):
    if isinstance(value, tuple):
        return [leaf for v in value for leaf in _flatten(v)]
    return [value.detach().numpy()]


def _args(lib, arrays, single):
    tensors = tuple(lib.tensor(a, dtype=lib.float64) for a in arrays)
    return tensors[0] if single else tensors


# a bare tensor (not a tuple) only where the function takes one input
JACOBIAN_CASES = [(name, single) for name, (_, arrays) in _funcs(gv).items() for single in (True, False)
                  if not (single and len(arrays) > 1)]


@pytest.mark.oracle
@pytest.mark.parametrize("name, single", JACOBIAN_CASES)
def test_jacobian_matches_torch(name, single):
    torch = pytest.importorskip("torch")
    fn, arrays = _funcs(gv)[name]
    tfn, _ = _funcs(torch)[name]
    got = jacobian(fn, _args(gv, arrays, single))
    expected = torch.autograd.functional.jacobian(tfn, _args(torch, arrays, single))
    assert type(got) is type(expected) or (isinstance(got, gv.Tensor) and isinstance(expected, torch.Tensor))
    got_leaves, expected_leaves = _flatten(got), _flatten(expected)
    assert [g.shape for g in got_leaves] == [e.shape for e in expected_leaves]
    for g, e in zip(got_leaves, expected_leaves):
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-14)


@pytest.mark.oracle
@pytest.mark.parametrize("name", ["square", "matrix", "two outputs", "unused input", "scalar"])
def test_vjp_matches_torch(name):
    torch = pytest.importorskip("torch")
    fn, arrays = _funcs(gv)[name]
    tfn, _ = _funcs(torch)[name]
    t_inputs = _args(torch, arrays, False)
    t_out = tfn(*t_inputs)
    rng = np.random.default_rng(1)
    t_outs = t_out if isinstance(t_out, tuple) else (t_out,)
    vs = [rng.standard_normal(tuple(o.shape)) for o in t_outs]
    if name == "scalar":
        got, expected = vjp(fn, _args(gv, arrays, False)), torch.autograd.functional.vjp(tfn, t_inputs)
    else:
        pack = (lambda lib: tuple(lib.tensor(v) for v in vs)) if isinstance(t_out, tuple) else \
            (lambda lib: lib.tensor(vs[0]))
        got = vjp(fn, _args(gv, arrays, False), pack(gv))
        expected = torch.autograd.functional.vjp(tfn, t_inputs, pack(torch))
    for g, e in zip(_flatten(got), _flatten(expected)):
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-14)


def test_jacobian_matches_central_differences():
    fn = _funcs(gv)["matrix"][0]
    x, y = gv.tensor(X), gv.tensor(Y)
    jx, jy = jacobian(fn, (x, y))
    eps = 1e-6
    for k in range(X.size):
        step = np.zeros(X.size)
        step[k] = eps
        plus = fn(gv.tensor(X + step.reshape(X.shape)), y).numpy()
        minus = fn(gv.tensor(X - step.reshape(X.shape)), y).numpy()
        np.testing.assert_allclose(jx.numpy()[..., k // 3, k % 3], (plus - minus) / (2 * eps), rtol=1e-6, atol=1e-8)
    assert tuple(jy.shape) == (2, 3)
    assert x.requires_grad is False and x.grad is None  # the caller's tensors are left alone


@pytest.mark.oracle
@pytest.mark.parametrize("call", ["v None", "v size", "output list", "output float", "input list"])
def test_errors_match_torch(call):
    torch = pytest.importorskip("torch")

    def run(lib, jac, vjp_):
        x = lib.tensor([1.0, 2.0])
        if call == "v None":
            return vjp_(lambda x: x ** 2, x)
        if call == "v size":
            return vjp_(lambda x: x ** 2, x, lib.ones(3))
        if call == "output list":
            return jac(lambda x: [x], x)
        if call == "output float":
            return jac(lambda x: 3.0, x)
        return jac(lambda x: x, [1.0])

    with pytest.raises((RuntimeError, TypeError)) as expected:
        run(torch, torch.autograd.functional.jacobian, torch.autograd.functional.vjp)
    with pytest.raises(type(expected.value)) as got:
        run(gv, jacobian, vjp)
    assert str(got.value) == str(expected.value)


@pytest.mark.parametrize("kwargs, torch_name", [({"create_graph": True}, "create_graph=True"),
                                                ({"strict": True}, "strict=True"),
                                                ({"vectorize": True}, "vectorize=True")])
def test_unsupported_options_are_one_line_errors(kwargs, torch_name):
    with pytest.raises(UnsupportedError) as err:
        jacobian(lambda x: x * 2, gv.ones(2), **kwargs)
    assert err.value.torch_name == torch_name and "\n" not in str(err.value)
