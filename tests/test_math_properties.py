"""Properties of the binary pointwise ops on random broadcastable shapes (hypothesis): the forward equals
numpy's broadcast result, the gradient of each input has that input's shape and equals central differences."""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import gradviz as gv
from gradviz.autograd import gradcheck

SETTINGS = settings(deadline=None, max_examples=80, suppress_health_check=[HealthCheck.too_slow])

# name: (gradviz op, numpy reference, how to move the second operand away from the op's kinks)
BINARY = {
    "atan2": (gv.atan2, np.arctan2, lambda b: b + np.sign(b) * 0.5),
    "hypot": (gv.hypot, np.hypot, lambda b: b + np.sign(b) * 0.5),
    "fmod": (gv.fmod, np.fmod, lambda b: b + np.sign(b) * 0.5),
    "remainder": (gv.remainder, np.remainder, lambda b: b + np.sign(b) * 0.5),
    "maximum": (gv.maximum, np.maximum, lambda b: b + 0.05),
    "minimum": (gv.minimum, np.minimum, lambda b: b + 0.05),
    "lerp": (lambda a, b: gv.lerp(a, b, 0.25), lambda a, b: a + 0.25 * (b - a), lambda b: b),
    "pow": (lambda a, b: (a.abs() + 0.5) ** b, lambda a, b: (np.abs(a) + 0.5) ** b, lambda b: b),
    "clamp_min": (gv.clamp_min, np.maximum, lambda b: b + 0.05),
    "where": (lambda a, b: gv.where(a > 0, a, b), lambda a, b: np.where(a > 0, a, b), lambda b: b),
}


@SETTINGS
@given(st.sampled_from(sorted(BINARY)),
       hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=3),
       st.integers(0, 2 ** 16))
def test_binary_ops_broadcast_and_differentiate(name, shapes, seed):
    op, reference, shift = BINARY[name]
    rng = np.random.default_rng(seed)
    sa, sb = shapes.input_shapes
    a = rng.uniform(-2, 2, sa)
    a = a + np.sign(a) * 0.05  # away from 0, where where/remainder kink
    b = shift(rng.uniform(-2, 2, sb))
    ga = gv.tensor(a, dtype=gv.float64, requires_grad=True)
    gb = gv.tensor(b, dtype=gv.float64, requires_grad=True)
    out = op(ga, gb)
    assert out.shape == shapes.result_shape
    np.testing.assert_allclose(out.detach().numpy(), reference(a, b), rtol=1e-12, atol=1e-12)
    if name in ("fmod", "remainder") and np.any(np.abs(np.remainder(a, b)) < 1e-3):
        return  # a jump of the result lies within the finite-difference step
    assert gradcheck(op, [ga, gb], eps=1e-6, atol=1e-5, rtol=1e-3)
    out.sum().backward()
    assert ga.grad.shape == sa and gb.grad.shape == sb
