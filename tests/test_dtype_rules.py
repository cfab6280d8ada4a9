"""PyTorch's type promotion: ``gradviz.result_type`` and the dtype of every binary op's result.

The oracle tests run a grid of dtypes (bool, uint8, int32, int64, float32, float64) by operand kind (a tensor
with dimensions, a 0-dim tensor, a Python bool/int/float) against torch; the plain tests pin the rules that
matter most with literal dtypes, so they hold where torch is not installed.
"""

import itertools

import numpy as np
import pytest

import gradviz as gv
from gradviz import dtypes

DTYPES = ["bool", "uint8", "int32", "int64", "float32", "float64"]
SCALARS = [True, 3, 2.5]


# ----- the rules, with literal dtypes ----------------------------------------------------------------------
def _t(values, dtype, shape=(2,)):
    return gv.tensor(np.broadcast_to(np.asarray(values), shape).copy(), dtype=dtype)


@pytest.mark.parametrize("a, b, expected", [
    (_t(1, "int64"), 2.5, "float32"),  # a Python float of lower priority brings the default dtype
    (_t(1, "int32"), 7, "int32"),  # a Python int does not widen an int tensor
    (_t(1, "uint8"), 7, "uint8"),
    (_t(True, "bool"), 7, "int64"),  # ...but lifts a bool tensor to int64
    (_t(True, "bool"), True, "bool"),
    (_t(1, "float32"), _t(1, "float64", ()), "float32"),  # a 0-dim tensor of the same category does not widen
    (_t(1, "int64"), _t(1, "float64", ()), "float64"),  # ...one of a higher category keeps its own width
    (_t(1, "int32"), _t(1, "int64", ()), "int32"),
    (_t(1, "uint8"), _t(1, "int32"), "int32"),
    (_t(1, "uint8"), _t(1, "bool"), "uint8"),
    (_t(1, "int64"), _t(1, "float32"), "float32"),  # numpy would say float64
    (_t(1, "float32", ()), 2.5, "float32"),
    (_t(1, "int64", ()), 2.5, "float32"),
])
def test_result_type_rules(a, b, expected):
    assert gv.result_type(a, b) == np.dtype(expected)
    assert dtypes.result_type(b, a) == np.dtype(expected)


def test_result_type_of_many_operands():
    assert dtypes.result_type(_t(1, "int32"), _t(1, "uint8"), 4, _t(1, "float64", ())) == np.float64
    assert dtypes.result_type(True, 2) == np.int64
    assert dtypes.result_type(1, 2.0) == np.float32


def test_promote_types_and_can_cast():
    assert gv.promote_types(gv.int64, gv.float32) == np.float32
    assert gv.promote_types(gv.uint8, np.int8) == np.int16
    assert gv.promote_types(gv.bool, gv.uint8) == np.uint8
    assert gv.can_cast(gv.float64, gv.float32) and gv.can_cast(gv.int64, gv.uint8)
    assert not gv.can_cast(gv.float32, gv.int64) and not gv.can_cast(gv.uint8, gv.bool)


def test_default_float_is_what_a_python_float_becomes():
    assert dtypes.default_float() == np.float32
    dtypes._DEFAULT_FLOAT[0] = dtypes.float64
    try:
        assert gv.result_type(_t(1, "int64"), 0.5) == np.float64
    finally:
        dtypes._DEFAULT_FLOAT[0] = dtypes.float32


def test_result_type_rejects_what_is_not_a_number():
    with pytest.raises(TypeError, match="neither a Tensor nor a Number"):
        gv.result_type(_t(1, "int64"), "2")


# ----- the oracle grid -------------------------------------------------------------------------------------
def _operands():
    """(label, gradviz operand, torch-operand maker): tensors with dims and 0-dim of each dtype, and scalars."""
    out = []
    for name, shape in itertools.product(DTYPES, [(2, 3), ()]):
        values = (np.arange(6).reshape(2, 3) % 3 + 1)[(...,) if shape else (0, 0)]
        out.append((f"{name}{list(shape)}", np.asarray(values).astype(name)))
    out.extend((repr(s), s) for s in SCALARS)
    return out


OPERANDS = _operands()
PAIRS = [(a, b) for a, b in itertools.product(OPERANDS, OPERANDS)
         if isinstance(a[1], np.ndarray) or isinstance(b[1], np.ndarray)]


def _both(value):
    import torch

    if isinstance(value, np.ndarray):
        return gv.tensor(value), torch.tensor(value)
    return value, value


def _torch_dtype_name(dtype):
    return str(dtype).replace("torch.", "")


@pytest.mark.oracle
@pytest.mark.parametrize("a, b", PAIRS, ids=[f"{a[0]}-{b[0]}" for a, b in PAIRS])
def test_result_type_matches_torch(a, b):
    torch = pytest.importorskip("torch")
    ga, ta = _both(a[1])
    gb, tb = _both(b[1])
    assert str(gv.result_type(ga, gb)) == _torch_dtype_name(torch.result_type(ta, tb))


@pytest.mark.oracle
@pytest.mark.parametrize("a, b", list(itertools.product(DTYPES, DTYPES)))
def test_promote_types_and_can_cast_match_torch(a, b):
    torch = pytest.importorskip("torch")
    ta, tb = getattr(torch, a), getattr(torch, b)
    assert str(gv.promote_types(a, b)) == _torch_dtype_name(torch.promote_types(ta, tb))
    assert gv.can_cast(a, b) == torch.can_cast(ta, tb)


# ----- every binary op follows the rules: dtype and value against torch, or both refuse ------------------------
OPS = {
    "add": lambda m, a, b: a + b, "sub": lambda m, a, b: a - b, "mul": lambda m, a, b: a * b,
    "div": lambda m, a, b: a / b, "pow": lambda m, a, b: a ** b, "remainder": lambda m, a, b: a % b,
    "floor_divide": lambda m, a, b: a // b, "eq": lambda m, a, b: a == b, "lt": lambda m, a, b: a < b,
    "and": lambda m, a, b: a & b, "xor": lambda m, a, b: a ^ b,
    "where": lambda m, a, b: m.where(m.tensor([[True, False, True], [False, True, False]]), a, b),
    "fmod": lambda m, a, b: m.fmod(a, b) if m.is_tensor(a) else m.fmod(b, a),
    "maximum": lambda m, a, b: m.maximum(a, b), "minimum": lambda m, a, b: m.minimum(a, b),
    "atan2": lambda m, a, b: m.atan2(a, b), "clamp_min": lambda m, a, b: m.clamp(a, min=b),
    "logical_and": lambda m, a, b: m.logical_and(a, b),
}
TENSOR_ONLY = {"maximum", "minimum", "atan2", "logical_and", "clamp_min"}  # torch takes no Python number there
OP_PAIRS = [(op, a, b) for op in OPS for a, b in PAIRS
            if not (op in TENSOR_ONLY and not (isinstance(a[1], np.ndarray) and isinstance(b[1], np.ndarray)))
            and not (op == "clamp_min" and a[1].ndim == 0)]


# one test per op and left operand, its right operands in a loop: the grid's ~3,500 cases as ~250 test items (the
# per-item cost of pytest and xdist was most of the file's time); every case is checked and every mismatch named
LEFT_OPERANDS = sorted({(op, a[0]) for op, a, _ in OP_PAIRS})
_REFUSALS = (RuntimeError, TypeError, NotImplementedError)


def _op_mismatch(torch, op, a, b):
    """What differs between gradviz and torch on ``op(a, b)`` (dtype, shape, values, or one refusing), or None."""
    ga, ta = _both(a[1])
    gb, tb = _both(b[1])
    try:
        expected = OPS[op](torch, ta, tb)
    except _REFUSALS:
        try:
            got = OPS[op](gv, ga, gb)
        except _REFUSALS:
            return None
        return f"torch refuses, gradviz gives {got.dtype}"
    got = OPS[op](gv, ga, gb)
    if str(got.dtype) != _torch_dtype_name(expected.dtype):
        return f"dtype {got.dtype}, torch {expected.dtype}"
    if got.shape != tuple(expected.shape):
        return f"shape {got.shape}, torch {tuple(expected.shape)}"
    if not np.allclose(got.numpy(), expected.numpy(), rtol=1e-6, atol=0, equal_nan=True):
        return f"values {got.numpy().tolist()}, torch {expected.numpy().tolist()}"
    return None


@pytest.mark.oracle
@pytest.mark.parametrize("op, left", LEFT_OPERANDS, ids=[f"{op}-{left}" for op, left in LEFT_OPERANDS])
def test_binary_op_dtype_and_value_match_torch(op, left):
    torch = pytest.importorskip("torch")
    cases = [(a, b) for o, a, b in OP_PAIRS if o == op and a[0] == left]
    assert cases
    mismatches = [f"{op}({a[0]}, {b[0]}): {found}" for a, b in cases
                  if (found := _op_mismatch(torch, op, a, b)) is not None]
    assert mismatches == []


def test_float32_to_an_int64_tensor_power_feeds_linear():
    # The report: gradviz gave float64 here, and nn.Linear then failed on the mixed dtypes.
    x = gv.tensor([[1.5, 2.0]]) ** gv.tensor([2, 3])
    assert x.dtype == np.float32
    layer = gv.nn.Linear(2, 1)
    assert layer(x).dtype == np.float32


@pytest.mark.parametrize("expr, expected", [
    (lambda: gv.tensor([1, 2]) / gv.tensor([2, 4]), "float32"),  # true division of integers
    (lambda: gv.tensor([1, 2]) / 2, "float32"),
    (lambda: gv.tensor([1, 2]) * 0.5, "float32"),
    (lambda: gv.tensor([1, 2], dtype=gv.int32) + 1, "int32"),
    (lambda: gv.tensor([True]) + gv.tensor([True]), "bool"),
    (lambda: gv.tensor([1.0]) + gv.tensor(1.0, dtype=gv.float64), "float32"),
    (lambda: gv.tensor([1.0]) < gv.tensor([1], dtype=gv.int32), "bool"),
    (lambda: gv.where(gv.tensor([True]), gv.tensor([1]), 2.5), "float32"),
    (lambda: gv.tensor([1, 4]).clamp(1.5), "float32"),
    (lambda: gv.tensor([1, 4]).sin(), "float32"),
    (lambda: gv.tensor([1, 4]).floor(), "int64"),
    (lambda: gv.tensor([1, 4], dtype=gv.uint8) & 3, "uint8"),
    (lambda: gv.tensor([1, 4]).masked_fill(gv.tensor([True, False]), 2.5), "int64"),
])
def test_op_result_dtypes(expr, expected):
    assert expr().dtype == np.dtype(expected)


def test_comparison_happens_in_the_promoted_dtype():
    # 0.1 in float32 equals a float64 0-dim 0.1 once that is rounded to float32 (torch's answer), not before.
    assert (gv.tensor([0.1]) == gv.tensor(0.1, dtype=gv.float64)).item() is True


@pytest.mark.parametrize("expr, error, message", [
    (lambda: gv.tensor([True]) - gv.tensor([True]), RuntimeError, "Subtraction, the `-` operator, with two bool"),
    (lambda: -gv.tensor([True]), RuntimeError, "Negation, the `-` operator, on a bool tensor is not supported"),
    (lambda: gv.tensor([[1.0]]) @ gv.tensor([[1.0]], dtype=gv.float64), RuntimeError,
     "expected m1 and m2 to have the same dtype, but got: float != double"),
    (lambda: gv.tensor([1.0]) @ gv.tensor([1.0], dtype=gv.float64), RuntimeError,
     "dot : expected both vectors to have same dtype, but found Float and Double"),
    (lambda: gv.where(gv.tensor([1.0]), gv.tensor([1.0]), 0.0), RuntimeError,
     "where expected condition to be a boolean tensor, but got a tensor with dtype Float"),
    (lambda: gv.tensor([1.0]) & gv.tensor([1.0]), NotImplementedError,
     "\"bitwise_and_cpu\" not implemented for 'Float'"),
    (lambda: gv.tensor([1, 2]).sin_(), RuntimeError, "result type Float can't be cast to the desired output type Long"),
])
def test_promotion_errors_use_torch_wording(expr, error, message):
    with pytest.raises(error) as info:
        expr()
    assert str(info.value).startswith(message)
