"""The numerical backward check (wrong-backward) on its own: wrong backwards of several kinds are caught and
name the right input; correct ones — kinks at exact zeros, ctx state, in-place forwards, non-differentiable
outputs, float32, several outputs — never are; the probes change nothing the script sees."""

import numpy as np
import pytest

import gradviz as torch
from gradviz.autograd import Function
from gradviz.tracing.adapters.gradviz.probe import run_check


def _leaf(shape, seed=0, dtype=np.float64):
    return torch.tensor(np.random.default_rng(seed).standard_normal(shape).astype(dtype), requires_grad=True)


class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return g * b, g * a


class MulWrongOperand(Mul):  # b's gradient computed from the wrong operand
    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return g * b, g * b


class Cube(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x ** 2


class CubeDroppedFactor(Cube):
    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x ** 2


class Relu(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clamp(min=0)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (x > 0).double()


class ReluMissingMask(Relu):
    @staticmethod
    def backward(ctx, g):
        return g


class MatMul(Function):
    @staticmethod
    def forward(ctx, a, w):
        ctx.save_for_backward(a, w)
        return a @ w

    @staticmethod
    def backward(ctx, g):
        a, w = ctx.saved_tensors
        return g @ w.t(), a.t() @ g


class MatMulTransposed(MatMul):  # the weight's gradient transposed the wrong way (square shapes hide it)
    @staticmethod
    def backward(ctx, g):
        a, w = ctx.saved_tensors
        return g @ w.t(), (a.t() @ g).t()


class AddBias(Function):
    @staticmethod
    def forward(ctx, x, b):
        return x + b

    @staticmethod
    def backward(ctx, g):
        return g, g.sum(0)


class AddBiasMeanReduced(AddBias):  # the broadcast dimension averaged instead of summed
    @staticmethod
    def backward(ctx, g):
        return g, g.mean(0)


@pytest.mark.parametrize("cls, args, index, name", [
    (MulWrongOperand, lambda: (_leaf((3, 4)), _leaf((3, 4), 1)), 1, "b"),
    (CubeDroppedFactor, lambda: (_leaf((5,)),), 0, "x"),
    (ReluMissingMask, lambda: (_leaf((4, 4)),), 0, "x"),
    (MatMulTransposed, lambda: (_leaf((3, 3)), _leaf((3, 3), 1)), 1, "w"),
    (AddBiasMeanReduced, lambda: (_leaf((6, 3)), _leaf((3,), 1)), 1, "b"),
])
def test_wrong_backwards_are_caught_on_the_right_input(cls, args, index, name):
    result = run_check(cls, args(), {})
    assert result.status == "failed"
    assert result.mismatch.index == index and result.mismatch.name == name
    assert result.mismatch.relative_error > 0.05
    assert result.dtype == "float64"


def test_dropped_factor_error_size_is_the_factor():
    result = run_check(CubeDroppedFactor, (_leaf((7,)),), {})
    # backward gives 1/3 of the true slope along any direction: relative error 2/3
    assert result.mismatch.relative_error == pytest.approx(2 / 3, rel=1e-3)


@pytest.mark.parametrize("cls, args", [
    (Mul, lambda: (_leaf((3, 4)), _leaf((3, 4), 1))),
    (Cube, lambda: (_leaf((5,)),)),
    (MatMul, lambda: (_leaf((3, 3)), _leaf((3, 3), 1))),
    (AddBias, lambda: (_leaf((6, 3)), _leaf((3,), 1))),
])
def test_correct_backwards_pass(cls, args):
    result = run_check(cls, args(), {})
    assert result.status == "passed" and result.reason is None
    assert result.checked_inputs == list(range(len(args())))


def test_kinks_at_exact_zeros_are_not_flagged():
    x = torch.tensor(np.array([[-1.0, 0.0, 2.0, 0.0], [0.0, 0.0, -3.0, 0.5]]), requires_grad=True)
    result = run_check(Relu, (x,), {})
    assert result.status == "passed"
    assert "kink" in result.reason


class AbsMax(Function):  # abs and a max with ties, both at exact kinks
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.abs().max()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        a = x.abs()
        first = np.zeros(a.shape)
        first[np.unravel_index(np.argmax(a.detach().numpy()), a.shape)] = 1.0
        return g * torch.tensor(first) * torch.tensor(np.sign(x.detach().numpy()))


def test_abs_and_max_ties_are_not_flagged():
    x = torch.tensor(np.array([2.0, -2.0, 0.0, 1.0]), requires_grad=True)
    assert run_check(AbsMax, (x,), {}).status == "passed"


class Scale(Function):  # a non-tensor argument and ctx state set by forward
    @staticmethod
    def forward(ctx, x, factor, *, power=2):
        ctx.factor, ctx.power = factor, power
        ctx.save_for_backward(x)
        return factor * x ** power

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * ctx.factor * ctx.power * x ** (ctx.power - 1), None


def test_non_tensor_arguments_and_ctx_state_are_honoured():
    result = run_check(Scale, (_leaf((4,)), 2.5), {"power": 3})
    assert result.status == "passed" and result.checked_inputs == [0]


class DoubleInPlace(Function):  # in-place inside forward, marked dirty
    @staticmethod
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g * 2


def test_in_place_forward_with_mark_dirty_passes_and_leaves_the_input_alone():
    base = _leaf((3,))
    x = base * 1.0  # a non-leaf, so an in-place forward is allowed
    before = x.detach().numpy().copy()
    assert run_check(DoubleInPlace, (x,), {}).status == "passed"
    np.testing.assert_array_equal(x.detach().numpy(), before)


class SortWithIndices(Function):  # two outputs, the second marked non-differentiable
    @staticmethod
    def forward(ctx, x):
        order = np.argsort(x.detach().numpy(), kind="stable")
        ctx.order = order
        idx = torch.tensor(order.astype(np.float64))
        ctx.mark_non_differentiable(idx)
        return torch.tensor(x.detach().numpy()[order]), idx

    @staticmethod
    def backward(ctx, g, g_idx):
        out = np.zeros(g.shape)
        out[ctx.order] = g.numpy()
        return torch.tensor(out)


def test_non_differentiable_outputs_are_left_out():
    result = run_check(SortWithIndices, (_leaf((6,)),), {})
    assert result.status == "passed"


class SinCos(Function):  # several outputs
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin(), x.cos()

    @staticmethod
    def backward(ctx, gs, gc):
        (x,) = ctx.saved_tensors
        return gs * x.cos() - gc * x.sin()


class SinCosWrongSign(SinCos):
    @staticmethod
    def backward(ctx, gs, gc):
        (x,) = ctx.saved_tensors
        return gs * x.cos() + gc * x.sin()


def test_several_outputs():
    assert run_check(SinCos, (_leaf((5,)),), {}).status == "passed"
    assert run_check(SinCosWrongSign, (_leaf((5,)),), {}).status == "failed"


def test_float32_inputs_are_probed_in_float64_when_forward_allows():
    x = _leaf((8,), dtype=np.float32)
    assert run_check(Cube, (x,), {}).dtype == "float64"
    assert run_check(Cube, (x,), {}).status == "passed"
    assert run_check(CubeDroppedFactor, (x,), {}).status == "failed"


class Float32Only(Function):  # forward insists on float32: probed in float32 with a looser tolerance
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.tensor(np.tanh(x.detach().numpy()).astype(np.float32))

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * torch.tensor((1 - np.tanh(x.detach().numpy()) ** 2).astype(np.float32))


class Float32OnlyWrong(Float32Only):
    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * torch.tensor((1 - np.tanh(x.detach().numpy())).astype(np.float32))


def test_float32_only_functions_use_a_float32_tolerance():
    x = _leaf((16,), dtype=np.float32)
    ok = run_check(Float32Only, (x,), {})
    assert ok.dtype == "float32" and ok.status == "passed"
    assert run_check(Float32OnlyWrong, (x,), {}).status == "failed"


class NoGradForSecond(Function):  # backward returns None for an input: that input is skipped
    @staticmethod
    def forward(ctx, x, y):
        return x * 2 + y

    @staticmethod
    def backward(ctx, g):
        return g * 2, None


def test_inputs_whose_gradient_is_none_are_skipped():
    result = run_check(NoGradForSecond, (_leaf((3,)), _leaf((3,), 1)), {})
    assert result.status == "passed" and result.checked_inputs == [0]


def test_integer_inputs_and_no_grad_inputs_are_skipped():
    ints = torch.tensor(np.array([1, 2, 3]))
    assert run_check(Mul, (ints, ints), {}).status == "skipped"
    plain = torch.tensor(np.array([1.0, 2.0]))
    assert run_check(Cube, (plain,), {}).reason == "no input requires grad"


class Noisy(Function):  # draws random numbers and prints inside forward
    @staticmethod
    def forward(ctx, x):
        print("inside forward")
        mask = (torch.rand(*x.shape) > 0.3).double()
        ctx.save_for_backward(mask)
        return x * mask + np.random.standard_normal() * 0

    @staticmethod
    def backward(ctx, g):
        (mask,) = ctx.saved_tensors
        return g * mask


def test_probes_are_invisible(capsys):
    torch.manual_seed(7)
    np.random.seed(7)
    x = _leaf((10,))
    result = run_check(Noisy, (x,), {})
    after_check = (torch.rand(3).numpy(), np.random.standard_normal(2))
    torch.manual_seed(7)
    np.random.seed(7)
    after_nothing = (torch.rand(3).numpy(), np.random.standard_normal(2))
    assert result.status == "passed"  # every probe saw the same dropout mask
    np.testing.assert_array_equal(after_check[0], after_nothing[0])
    np.testing.assert_array_equal(after_check[1], after_nothing[1])
    assert capsys.readouterr().out == ""


class Raises(Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        raise ValueError("boom\nsecond line")


def test_a_probe_that_raises_is_a_skip_not_an_error():
    result = run_check(Raises, (_leaf((2,)),), {})
    assert result.status == "skipped"
    assert result.reason == "the probe raised ValueError: boom"
