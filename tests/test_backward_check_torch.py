"""The backward check's probes on real PyTorch: the same verdicts as on gradviz's engine, and no trace left in
torch's random stream or the script's output."""

import numpy as np
import pytest

from gradviz.tracing.adapters.torch.probe import run_check

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.oracle


class Mul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return g * b, g * a


class MulWrongOperand(Mul):
    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return g * b, g * b


class Relu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clamp(min=0)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (x > 0)


class ReluMissingMask(Relu):
    @staticmethod
    def backward(ctx, g):
        return g


class AddBias(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, b):
        return x + b

    @staticmethod
    def backward(ctx, g):
        return g, g.sum(0)


class AddBiasMeanReduced(AddBias):
    @staticmethod
    def backward(ctx, g):
        return g, g.mean(0)


class Dropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, p):
        mask = (torch.rand_like(x) > p).to(x.dtype) / (1 - p)
        ctx.save_for_backward(mask)
        print("dropout forward")
        return x * mask

    @staticmethod
    def backward(ctx, g):
        (mask,) = ctx.saved_tensors
        return g * mask, None


def _leaf(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=dtype).requires_grad_()


@pytest.mark.parametrize("cls, make, index, name", [
    (MulWrongOperand, lambda: (_leaf(3, 4), _leaf(3, 4, seed=1)), 1, "b"),
    (ReluMissingMask, lambda: (_leaf(4, 4),), 0, "x"),
    (AddBiasMeanReduced, lambda: (_leaf(6, 3), _leaf(3, seed=1)), 1, "b"),
])
def test_wrong_backwards_are_caught(cls, make, index, name):
    result = run_check(torch, cls, make(), {})
    assert result.status == "failed"
    assert (result.mismatch.index, result.mismatch.name) == (index, name)
    assert result.dtype == "float64"  # float32 inputs, probed in float64


@pytest.mark.parametrize("cls, make", [
    (Mul, lambda: (_leaf(3, 4), _leaf(3, 4, seed=1))),
    (AddBias, lambda: (_leaf(6, 3), _leaf(3, seed=1))),
    (Relu, lambda: (torch.tensor([[0.0, 1.0], [-2.0, 0.0]], requires_grad=True),)),
])
def test_correct_backwards_pass(cls, make):
    assert run_check(torch, cls, make(), {}).status == "passed"


def test_random_state_and_output_are_untouched(capsys):
    torch.manual_seed(3)
    np.random.seed(3)
    result = run_check(torch, Dropout, (_leaf(50), 0.5), {})
    after_check = (torch.rand(4), np.random.standard_normal(2))
    torch.manual_seed(3)
    np.random.seed(3)
    after_nothing = (torch.rand(4), np.random.standard_normal(2))
    assert result.status == "passed" and result.checked_inputs == [0]
    assert torch.equal(after_check[0], after_nothing[0])
    np.testing.assert_array_equal(after_check[1], after_nothing[1])
    assert capsys.readouterr().out == ""
