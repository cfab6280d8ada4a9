"""The pointwise math family, logical ops and masked_fill against PyTorch: values, gradients, node names,
in-place forms, integer inputs and the errors PyTorch raises, with the same calls on both libraries."""

import math

import numpy as np
import pytest

import gradviz as gv
from gradviz.ops.math_special import erf_array, erfc_array, erfinv_array

# Each unary op: the name (a function at top level and a Tensor method) and the map that puts a standard normal
# sample into its domain, away from its kinks.
UNARY = {
    "sin": None, "cos": None, "tan": lambda x: x * 0.7, "asin": lambda x: np.tanh(x) * 0.9,
    "acos": lambda x: np.tanh(x) * 0.9, "atan": None, "sinh": None, "cosh": None, "tanh": None, "asinh": None,
    "acosh": lambda x: np.abs(x) + 1.1, "atanh": lambda x: np.tanh(x) * 0.9, "exp": None, "exp2": None,
    "expm1": None, "log": lambda x: np.abs(x) + 0.1, "log2": lambda x: np.abs(x) + 0.1,
    "log10": lambda x: np.abs(x) + 0.1, "log1p": lambda x: np.abs(x), "sqrt": lambda x: np.abs(x) + 0.1,
    "rsqrt": lambda x: np.abs(x) + 0.1, "square": None, "reciprocal": lambda x: x + np.sign(x) * 0.3,
    "sigmoid": None, "abs": lambda x: x + np.sign(x) * 0.1, "neg": None, "sign": None, "floor": None, "ceil": None,
    "round": lambda x: x * 3, "trunc": lambda x: x * 3, "frac": lambda x: x * 3,
    "logit": lambda x: 0.05 + 0.9 / (1 + np.exp(-x)),
    "erf": None, "erfc": None, "erfinv": lambda x: np.tanh(x) * 0.95,
}
# PyTorch has these in-place forms but no derivative for them; gradviz's is checked against the out-of-place one.
NO_TORCH_INPLACE_DERIVATIVE = {"acosh", "asinh", "atanh"}


def _close(ours, theirs, dtype):
    tol = 1e-5 if dtype == "float32" else 1e-11
    np.testing.assert_allclose(np.asarray(ours, dtype=np.float64), np.asarray(theirs, dtype=np.float64),
                               rtol=tol, atol=tol)


def _sample(name, shape=(3, 4), seed=0):
    x = np.random.default_rng(seed).standard_normal(shape)
    return UNARY[name](x) if UNARY[name] is not None else x


def _node(t):
    return t.grad_fn.name().rstrip("0123456789")


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


@pytest.mark.oracle
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_value_gradient_and_node_match_torch(torch, name, dtype):
    x = _sample(name).astype(dtype)
    g = np.random.default_rng(1).standard_normal(x.shape).astype(dtype)
    ours = gv.tensor(x, requires_grad=True)
    theirs = torch.tensor(x, requires_grad=True)
    out, ref = getattr(gv, name)(ours), getattr(torch, name)(theirs)
    assert out.dtype == np.dtype(dtype)
    _close(out.detach().numpy(), ref.detach().numpy(), dtype)
    assert out.grad_fn.name() == _node(ref)
    out.backward(gv.tensor(g))
    ref.backward(torch.tensor(g))
    _close(ours.grad.numpy(), theirs.grad.numpy(), dtype)


@pytest.mark.oracle
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_in_place_form_matches_torch(torch, name):
    x = _sample(name)
    ours = gv.tensor(x, dtype=gv.float64, requires_grad=True)
    theirs = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    y = ours * 1
    assert getattr(y, name + "_")() is y
    if name in NO_TORCH_INPLACE_DERIVATIVE:
        z = getattr(theirs * 1, name)()
    else:
        z = theirs * 1
        getattr(z, name + "_")()
    _close(y.detach().numpy(), z.detach().numpy(), "float64")
    assert y._version == 1
    (y * y).sum().backward()
    (z * z).sum().backward()
    _close(ours.grad.numpy(), theirs.grad.numpy(), "float64")


@pytest.mark.oracle
@pytest.mark.parametrize("dtype", ["int64", "int32", "bool"])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_on_integer_tensors_matches_torch(torch, name, dtype):
    x = np.array([[0, 1, 2], [3, 1, 0]]) if dtype != "bool" else np.array([[True, False, True]])
    x = x.astype(dtype)
    try:
        ref = getattr(torch, name)(torch.tensor(x))
    except (RuntimeError, NotImplementedError, TypeError) as err:
        with pytest.raises(type(err)):
            getattr(gv, name)(gv.tensor(x))
        return
    out = getattr(gv, name)(gv.tensor(x))
    assert str(out.dtype) == str(ref.dtype).replace("torch.", "")
    np.testing.assert_allclose(out.numpy().astype(np.float64), ref.numpy().astype(np.float64), rtol=1e-6,
                               equal_nan=True)


@pytest.mark.oracle
@pytest.mark.parametrize("decimals", [-1, 0, 1, 3])
def test_round_decimals_matches_torch(torch, decimals):
    x = np.array([1.2345, -2.5, 0.5, 1.5, 125.0, 1234.5678, -0.05])
    for dtype in ("float32", "float64"):
        ours = gv.round(gv.tensor(x, dtype=dtype), decimals=decimals)
        ref = torch.round(torch.tensor(x, dtype=getattr(torch, dtype)), decimals=decimals)
        np.testing.assert_array_equal(ours.numpy(), ref.numpy())


@pytest.mark.oracle
@pytest.mark.filterwarnings("ignore:invalid value encountered in reduce:RuntimeWarning")  # the sum of +-inf
@pytest.mark.parametrize("eps", [None, 0.0, 0.1])
def test_logit_eps_matches_torch_outside_the_unit_interval_too(torch, eps):
    x = np.array([-0.5, 0.0, 0.05, 0.3, 0.95, 1.0, 1.5])
    ours = gv.tensor(x, dtype=gv.float64, requires_grad=True)
    theirs = torch.tensor(x, requires_grad=True)
    out, ref = gv.logit(ours, eps=eps), torch.logit(theirs, eps=eps)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-12, equal_nan=True)
    out.sum().backward()
    ref.sum().backward()
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-12, equal_nan=True)


# ----- binary and ternary ops ------------------------------------------------------------------------------
BINARY = {
    "atan2": (lambda m, a, b: m.atan2(a, b), None),
    "hypot": (lambda m, a, b: m.hypot(a, b), None),
    "fmod": (lambda m, a, b: m.fmod(a * 3, b), "nonzero"),
    "remainder": (lambda m, a, b: m.remainder(a * 3, b), "nonzero"),
    "remainder operator": (lambda m, a, b: (a * 3) % b, "nonzero"),
    "lerp tensor weight": (lambda m, a, b: m.lerp(a, b, (b * 0.1).sigmoid()), None),
    "lerp scalar weight": (lambda m, a, b: a.lerp(b, 0.75), None),
    "maximum": (lambda m, a, b: m.maximum(a, b), None),
    "minimum": (lambda m, a, b: m.minimum(a, b), None),
    "pow tensor exponent": (lambda m, a, b: a.abs() ** b, None),
    "clamp tensor bounds": (lambda m, a, b: m.clamp(a, b - 0.5, b + 0.5), None),
    "clamp crossed bounds": (lambda m, a, b: m.clamp(a, b + 0.5, b - 0.5), None),
    "clamp_min tensor": (lambda m, a, b: a.clamp_min(b), None),
    "where": (lambda m, a, b: m.where(a > b, a * 2, b), None),
    "masked_fill": (lambda m, a, b: a.masked_fill(b > 0, 0.25), None),
    "masked_fill 0-dim value": (lambda m, a, b: a.masked_fill(b > 0, b.sum()), None),
    "div trunc": (lambda m, a, b: m.div(a * 3, b, rounding_mode="trunc") + a, "nonzero"),
    "div floor": (lambda m, a, b: (a * 3).div(b, rounding_mode="floor") + a, "nonzero"),
}
SHAPES = [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 4), (3, 1)), ((), (3,))]


@pytest.mark.oracle
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_value_gradient_and_node_match_torch(torch, name, shapes):
    fn, domain = BINARY[name]
    rng = np.random.default_rng(3)
    a, b = (rng.standard_normal(s) for s in shapes)
    if domain == "nonzero":
        b = b + np.sign(b) * 0.5
    ga, gb = gv.tensor(a, dtype=gv.float64, requires_grad=True), gv.tensor(b, dtype=gv.float64, requires_grad=True)
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    out, ref = fn(gv, ga, gb), fn(torch, ta, tb)
    _close(out.detach().numpy(), ref.detach().numpy(), "float64")
    assert out.grad_fn.name() == _node(ref)
    g = rng.standard_normal(ref.shape)
    out.backward(gv.tensor(g, dtype=gv.float64))
    ref.backward(torch.tensor(g))
    for ours, theirs in ((ga, ta), (gb, tb)):
        if theirs.grad is None:
            assert ours.grad is None
        else:
            _close(ours.grad.numpy(), theirs.grad.numpy(), "float64")


@pytest.mark.oracle
@pytest.mark.parametrize("name", ["atan2", "hypot", "fmod", "remainder", "lerp", "clamp_min", "clamp_max",
                                  "masked_fill", "floor_divide", "logical_and", "bitwise_xor"])
def test_binary_in_place_form_matches_torch(torch, name):
    a = np.array([[0.5, -1.5, 2.5], [3.0, -0.25, 1.0]])
    b = np.array([1.5, -0.75, 2.0])
    args = {"lerp": lambda m, t: (t, 0.3), "masked_fill": lambda m, t: (t > 0, -1.0)}.get(name, lambda m, t: (t,))
    if name == "bitwise_xor":
        a, b = a.astype(np.int64), b.astype(np.int64)
    ours, theirs = gv.tensor(a), torch.tensor(a)
    got = getattr(ours, name + "_")(*args(gv, gv.tensor(b)))
    getattr(theirs, name + "_")(*args(torch, torch.tensor(b)))
    assert got is ours and ours._version == theirs._version
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12)


@pytest.mark.oracle
@pytest.mark.parametrize("name", ["eq", "ne", "lt", "le", "gt", "ge", "greater", "less_equal", "logical_and",
                                  "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor",
                                  "floor_divide", "remainder", "fmod"])
def test_comparison_logical_and_integer_ops_match_torch(torch, name):
    a = np.array([[0, 3, -7, 5], [2, 0, 1, -4]])
    b = np.array([2, 3, 2, -3])
    for dtype in ("int64", "int32", "bool") if name.startswith(("logical", "bitwise", "eq")) else ("int64",):
        x, y = a.astype(dtype), b.astype(dtype)
        ours = getattr(gv, name)(gv.tensor(x), gv.tensor(y))
        ref = getattr(torch, name)(torch.tensor(x), torch.tensor(y))
        assert str(ours.dtype) == str(ref.dtype).replace("torch.", "")
        np.testing.assert_array_equal(ours.numpy(), ref.numpy())
        assert not ours.requires_grad


@pytest.mark.oracle
def test_nan_tests_logical_not_and_invert_match_torch(torch):
    x = np.array([1.0, np.nan, np.inf, -np.inf, 0.0])
    for name in ("isnan", "isinf", "isfinite", "logical_not"):
        np.testing.assert_array_equal(getattr(gv, name)(gv.tensor(x)).numpy(),
                                      getattr(torch, name)(torch.tensor(x)).numpy())
    np.testing.assert_array_equal(gv.isfinite(gv.tensor([1, 2])).numpy(), [True, True])
    for values in ([True, False], [0, 5, -3]):
        np.testing.assert_array_equal((~gv.tensor(values)).numpy(), (~torch.tensor(values)).numpy())


@pytest.mark.oracle
@pytest.mark.parametrize("rounding_mode", ["trunc", "floor"])
def test_div_rounding_modes_on_integers_match_torch(torch, rounding_mode):
    a, b = np.array([7, -7, 6, -6, 0, 1]), np.array([2, 2, -4, -4, 3, -3])
    ours = gv.div(gv.tensor(a), gv.tensor(b), rounding_mode=rounding_mode)
    ref = torch.div(torch.tensor(a), torch.tensor(b), rounding_mode=rounding_mode)
    assert ours.dtype == np.int64
    np.testing.assert_array_equal(ours.numpy(), ref.numpy())


@pytest.mark.oracle
@pytest.mark.parametrize("call", [
    lambda m: m.frac(m.tensor([1, 2])),
    lambda m: m.hypot(m.tensor([1, 2]), m.tensor([1, 2])),
    lambda m: m.tensor([1, 2]) % 0,
    lambda m: m.tensor([1, 2]) // m.tensor([1, 0]),
    lambda m: m.lerp(m.tensor([1.0]), m.tensor([1.0], dtype=m.float64), 0.5),
    lambda m: m.tensor([1.0]).masked_fill(m.tensor([1]), 0.0),
    lambda m: m.tensor([1.0, 2.0]).masked_fill(m.tensor([True, False]), m.tensor([1.0, 2.0])),
    lambda m: m.bitwise_not(m.tensor([1.0])),
    lambda m: m.div(m.tensor([1.0]), 2, rounding_mode="round"),
    lambda m: (m.tensor([1.5], requires_grad=True) // 1).sum().backward(),
], ids=["frac long", "hypot long", "integer remainder by zero", "integer floor_divide by zero", "lerp dtypes",
        "masked_fill long mask", "masked_fill 1-d value", "bitwise_not float", "div bad rounding_mode",
        "floor_divide backward"])
def test_errors_match_torch(torch, call):
    with pytest.raises(Exception) as expected:
        call(torch)
    with pytest.raises(type(expected.value)) as got:
        call(gv)
    assert str(got.value) == str(expected.value)


# ----- erf, erfc, erfinv: accuracy without scipy ------------------------------------------------------------------
def test_erf_and_erfc_agree_with_math_to_float64():
    x = np.concatenate([np.linspace(-6, 6, 4001), [0.0, 1e-300, -1e-8, 2.4999999, 2.5, 26.0, -27.0]])
    erf_ref = np.array([math.erf(v) for v in x])
    erfc_ref = np.array([math.erfc(v) for v in x])
    np.testing.assert_allclose(erf_array(x), erf_ref, rtol=1e-13, atol=1e-300)
    np.testing.assert_allclose(erfc_array(x), erfc_ref, rtol=1e-10, atol=1e-300)


def test_erf_keeps_the_dtype_and_the_special_values():
    x = np.array([np.nan, np.inf, -np.inf, 0.5], dtype=np.float32)
    out = erf_array(x)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out[:3], [np.nan, 1.0, -1.0])
    np.testing.assert_array_equal(erfc_array(x)[:3], [np.nan, 0.0, 2.0])


def test_erfinv_inverts_erf():
    y = np.concatenate([np.linspace(-0.999999, 0.999999, 2001), [0.0, 1e-12, 1 - 1e-12]])
    x = erfinv_array(y)
    np.testing.assert_allclose(erf_array(x), y, rtol=1e-13, atol=1e-15)
    np.testing.assert_array_equal(erfinv_array(np.array([1.0, -1.0, 1.5, np.nan])), [np.inf, -np.inf, np.nan, np.nan])


@pytest.mark.oracle
def test_erfinv_matches_torch(torch):
    y = np.concatenate([np.linspace(-0.9999, 0.9999, 1001), [1e-12, 1 - 1e-12]])
    np.testing.assert_allclose(erfinv_array(y), torch.erfinv(torch.tensor(y)).numpy(), rtol=1e-12)


@pytest.mark.oracle
@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_maximum_takes_tensors_only_as_in_torch(torch, name):
    with pytest.raises(TypeError) as expected:
        getattr(torch, name)(torch.tensor([1.0]), 2.0)
    with pytest.raises(TypeError) as got:
        getattr(gv, name)(gv.tensor([1.0]), 2.0)
    assert str(got.value) == str(expected.value)


@pytest.mark.oracle
def test_where_with_a_condition_alone_gives_indices_as_torch(torch):
    cond = np.array([[True, False, True], [False, True, True]])
    ours, theirs = gv.where(gv.tensor(cond)), torch.where(torch.tensor(cond))
    assert len(ours) == len(theirs) == 2
    for o, t in zip(ours, theirs):
        assert o.dtype == np.int64
        np.testing.assert_array_equal(o.numpy(), t.numpy())


@pytest.mark.oracle
def test_float_floor_division_matches_torch_at_awkward_quotients(torch):
    a = np.array([1.0, -1.0, 0.3, -0.3, 7.0, 1e16, 5.0, -0.0])
    b = np.array([0.1, 0.1, 0.1, 0.1, -0.7, 3.0, np.inf, 2.0])
    for fn in (lambda m, x, y: m.div(x, y, rounding_mode="floor"), lambda m, x, y: x // y,
               lambda m, x, y: m.div(x, y, rounding_mode="trunc")):
        ours = fn(gv, gv.tensor(a, dtype=gv.float64), gv.tensor(b, dtype=gv.float64))
        ref = fn(torch, torch.tensor(a), torch.tensor(b))
        np.testing.assert_array_equal(ours.numpy(), ref.numpy())
        np.testing.assert_array_equal(np.signbit(ours.numpy()), np.signbit(ref.numpy()))


@pytest.mark.oracle
def test_integer_powers_with_negative_exponents_match_torch(torch):
    base, exponent = np.array([2, 1, -1, -1, 3, 0]), np.array([-1, -3, -3, -2, 2, 3])
    np.testing.assert_array_equal((gv.tensor(base) ** gv.tensor(exponent)).numpy(),
                                  (torch.tensor(base) ** torch.tensor(exponent)).numpy())
    with pytest.raises(RuntimeError) as expected:
        torch.tensor([2]) ** -1
    with pytest.raises(RuntimeError) as got:
        gv.tensor([2]) ** -1
    assert str(got.value) == str(expected.value)


@pytest.mark.oracle
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_special_values_match_torch(torch, name):
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 1e30, -1e-30], dtype=np.float32)
    with np.errstate(all="ignore"):
        ours = getattr(gv, name)(gv.tensor(x)).numpy()
    ref = getattr(torch, name)(torch.tensor(x)).numpy()
    np.testing.assert_allclose(ours, ref, rtol=1e-6, equal_nan=True)
    finite = ~np.isnan(ref)
    np.testing.assert_array_equal(np.signbit(ours[finite]), np.signbit(ref[finite]))  # -0.0 stays -0.0
