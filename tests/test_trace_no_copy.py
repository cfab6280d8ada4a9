"""The tracer's NaN/Inf check and gradient norms never copy the array they measure (issue 9): whatever its
strides (a broadcast gradient, a transposed or sliced view), the largest temporary stays far below its size, and
the answers equal numpy's own."""

import math
import tracemalloc

import numpy as np
import pytest

from gradviz.tracing.adapters.numpy_values import nonfinite, nonfinite_norm, norm_of, norm_one

MIB = 2**20


def _peak_while(fn, *args):
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        result = fn(*args)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, peak


def _views(base):
    """64 MiB worth of elements seen through strides that a plain ``ravel`` would have to copy."""
    return {
        "broadcast": np.broadcast_to(np.float32(0.5), (4096, 4096)),  # sum()'s backward: one element, strided 0
        "row broadcast": np.broadcast_to(base[:1], (base.shape[0], base.shape[1])),
        "every other column": base[:, ::2],
        "reversed rows": base[::-1],
        "axes permuted": base.reshape(64, 64, -1).transpose(1, 2, 0)[:, ::2],
    }


@pytest.fixture(scope="module")
def base():
    rng = np.random.default_rng(0)
    return rng.standard_normal((4096, 4096)).astype(np.float32)  # 64 MiB


@pytest.mark.parametrize("case", ["broadcast", "row broadcast", "every other column", "reversed rows",
                                  "axes permuted"])
def test_norm_and_check_make_no_big_temporary(base, case):
    view = _views(base)[case]
    norm, peak = _peak_while(norm_one, view)
    assert peak < 2 * MIB, f"norm_one allocated {peak / MIB:.1f} MiB on a {view.nbytes / MIB:.0f} MiB {case}"
    expected = float(np.sqrt(np.sum(np.square(view, dtype=np.float64))))
    assert norm == pytest.approx(expected, rel=1e-5)
    bad, peak = _peak_while(nonfinite, view)
    assert bad is False
    assert peak < 2 * MIB, f"nonfinite allocated {peak / MIB:.1f} MiB on a {case}"


def test_exact_check_finds_one_nan_in_a_strided_view_without_copying_it(base):
    data = base.copy()
    data[4000, 4094] = np.nan
    view = data[:, ::2]  # holds column 4094
    bad, peak = _peak_while(nonfinite, view)
    assert bad is True
    assert peak < 2 * MIB
    norm = norm_one(view)
    assert math.isnan(norm)
    found, peak = _peak_while(nonfinite_norm, norm, (view,))
    assert found is True and peak < 2 * MIB


def test_overflowing_but_finite_values_are_not_nonfinite():
    big = np.broadcast_to(np.float32(3e38), (1000, 1000))
    assert math.isinf(norm_one(big))  # the float64 sum of squares overflows
    assert nonfinite(big) is False
    assert nonfinite_norm(norm_one(big), (big,)) is False


def test_several_gradients_and_other_dtypes():
    a = np.arange(12, dtype=np.float64).reshape(3, 4).T
    b = np.broadcast_to(np.int32(2), (5, 7))
    c = np.array([3 + 4j, 0j])
    assert norm_of((a, None, b)) == pytest.approx(math.sqrt(float((a**2).sum()) + 4 * 35))
    assert norm_one(c) == pytest.approx(5.0)
    assert nonfinite(np.array([1 + 0j, complex(np.inf, 0)])) is True
    assert nonfinite(np.array([[1.0, np.inf]]).T) is True
