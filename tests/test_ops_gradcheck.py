"""Every op's backward against central differences (float64), driven by the table in gradcheck_cases.py;
and gradcheck itself must reject a wrong backward."""

import numpy as np
import pytest

import gradviz as gv
from gradviz.autograd import GradcheckError, gradcheck

from .gradcheck_cases import CASES, run_case


@pytest.mark.parametrize("case", CASES, ids=str)
def test_gradient_matches_central_differences(case):
    run_case(case)


def test_case_names_are_unique():
    names = [c.name for c in CASES]
    assert len(names) == len(set(names))


class WrongSquare(gv.Function):
    """x**2 whose backward forgets the factor 2."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x


class WrongSecondInput(gv.Function):
    """a*b with a correct gradient for a and a transposed one for b."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return grad * b, grad * a * 1.01


def _x(*shape, seed=0):
    return gv.tensor(np.random.default_rng(seed).standard_normal(shape), dtype=gv.float64, requires_grad=True)


def test_gradcheck_rejects_a_wrong_backward():
    x = _x(3)
    with pytest.raises(GradcheckError, match=r"Jacobian mismatch for output 0 with respect to input 0"):
        gradcheck(WrongSquare.apply, (x,))
    assert gradcheck(WrongSquare.apply, (x,), raise_exception=False) is False


def test_gradcheck_names_the_wrong_input():
    a, b = _x(2, 2, seed=1), _x(2, 2, seed=2)
    with pytest.raises(GradcheckError, match=r"with respect to input 1"):
        gradcheck(WrongSecondInput.apply, (a, b))


def test_gradcheck_accepts_a_correct_custom_function():
    class Square(gv.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return 2 * grad * x

    assert gradcheck(Square.apply, (_x(2, 3),)) is True


def test_gradcheck_compares_the_full_jacobian_not_its_sum():
    class SwapGrads(gv.Function):
        """Identity on 2 elements whose backward swaps them: row sums agree, the Jacobian does not."""

        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, grad):
            return grad.flip(0) if hasattr(grad, "flip") else grad[gv.tensor([1, 0])]

    with pytest.raises(GradcheckError):
        gradcheck(SwapGrads.apply, (_x(2),))


def test_gradcheck_refuses_float32_inputs():
    x = gv.randn(3, requires_grad=True)
    with pytest.raises(GradcheckError, match="use float64 inputs"):
        gradcheck(lambda v: v * 2, (x,))
