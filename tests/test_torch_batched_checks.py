"""The torch adapter's batched numeric checks: gradient norms (``norms``) and the NaN/Inf check of op outputs
(``OutputChecks``), each against a per-tensor computation, over the shapes and dtypes that take different
paths (many small tensors of one shape are stacked, big ones normed alone and once per buffer, 0-d and integer
tensors, views)."""

import math

import pytest

torch = pytest.importorskip("torch")

from gradviz.tracing.adapters.torch.events import _ATTEMPT, _SMALL, _STACKED, OutputChecks, norms  # noqa: E402


def _expected(t):
    return float(torch.linalg.vector_norm(t.double() if not t.is_complex() else t))


def _close(got, want):  # (float32 sums of thousands of terms: about 1e-5 apart)
    return got == want or (math.isnan(got) and math.isnan(want)) or math.isclose(got, want, rel_tol=1e-4)


def test_norms_match_each_tensor_on_every_path():
    g = torch.Generator().manual_seed(0)
    big = torch.randn(80, 70, generator=g)  # over _SMALL elements
    assert big.numel() > _SMALL
    tensors = [torch.randn(4, generator=g) for _ in range(_STACKED + 3)]  # stacked together
    tensors += [torch.randn(3, 5, generator=g) for _ in range(2)]  # a small shape seen twice: normed alone
    tensors += [torch.tensor(-2.5), torch.tensor(3.0, dtype=torch.float64)]  # 0-d
    tensors += [torch.arange(6), torch.tensor([True, False, True])]  # integers and booleans
    tensors += [big, big.t(), big[:, :3]]  # one buffer twice (a transpose) and a strided view of it
    tensors += [torch.randn(1, 4, generator=g).expand(5000, 4)]  # big, overlapping: normed alone
    tensors += [torch.randn(4, dtype=torch.float64, generator=g) for _ in range(_STACKED)]  # a second dtype
    got = norms(torch, tensors)
    assert len(got) == len(tensors)
    for t, value in zip(tensors, got):
        assert isinstance(value, float)
        assert _close(value, _expected(t)), (tuple(t.shape), t.dtype, value, _expected(t))


def test_norms_keep_nan_and_inf_in_their_place():
    tensors = [torch.ones(4) for _ in range(_STACKED + 2)]
    tensors[3] = torch.tensor([1.0, float("nan"), 0.0, 0.0])
    tensors[7] = torch.tensor([float("inf"), 0.0, 0.0, 0.0])
    got = norms(torch, tensors)
    assert math.isnan(got[3]) and got[7] == math.inf
    assert all(v == 2.0 for i, v in enumerate(got) if i not in (3, 7))


def test_norms_of_nothing():
    assert norms(torch, []) == []


class _Builder:
    def __init__(self):
        self.nonfinite = []

    def nonfinite_output(self, key):
        self.nonfinite.append(key)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_output_checks_name_exactly_the_outputs_holding_nan_or_inf(bad):
    builder = _Builder()
    checks = OutputChecks(torch, builder)
    outputs = {k: torch.ones(4) for k in range(10)}  # one trailing shape: one concatenation
    outputs.update({k: torch.ones(3, 2) for k in range(10, 14)})
    outputs[20] = torch.tensor(1.5)  # 0-d
    outputs[21] = torch.ones(2, 3, dtype=torch.float64)
    outputs[22] = torch.zeros(0, 4)  # empty
    outputs[5] = torch.tensor([0.0, bad, 1.0, 2.0])
    outputs[12] = torch.tensor([[bad, 0.0], [0.0, 0.0], [1.0, 1.0]])
    for key, t in outputs.items():
        checks.add(key, t)
    checks.add(30, torch.tensor([1, 2, 3]))  # integers: not held, cannot be NaN
    assert len(checks.pending) == len(outputs)
    checks.flush()
    assert sorted(builder.nonfinite) == [5, 12]
    assert checks.pending == [] and checks.held == 0


def test_output_checks_overflowing_sum_is_not_a_nan():
    builder = _Builder()
    checks = OutputChecks(torch, builder)
    checks.add(1, torch.full((4,), 3e38))  # finite values whose sum overflows float32
    checks.add(2, torch.full((4,), 3e38))
    checks.flush()
    assert builder.nonfinite == []


def test_output_checks_all_finite():
    builder = _Builder()
    checks = OutputChecks(torch, builder)
    for k in range(50):
        checks.add(k, torch.randn(2, 3))
    checks.flush()
    assert builder.nonfinite == []


def test_norms_of_alike_tensors_take_one_stack_and_match():
    tensors = [torch.full((2, 3), float(k)) for k in range(_ATTEMPT + 4)]
    tensors[2] = torch.arange(6).reshape(2, 3)  # an integer one among them: promoted, same norm
    tensors[5] = torch.tensor([[float("nan"), 0, 0], [0, 0, 0]])
    got = norms(torch, tensors)
    for k, (t, value) in enumerate(zip(tensors, got)):
        assert _close(value, _expected(t.float())), (k, value)
    for count in (_STACKED, _ATTEMPT):
        zero_d = [torch.tensor(float(-k)) for k in range(count)]
        assert norms(torch, zero_d) == [float(k) for k in range(count)]


@pytest.mark.parametrize("count", [12, _ATTEMPT + 5])
def test_output_checks_of_one_shape_and_of_1d_tensors_of_several_lengths(count):
    for make in (lambda k: torch.ones(3, 2), lambda k: torch.ones(k + 1)):
        builder = _Builder()
        checks = OutputChecks(torch, builder)
        for k in range(count):
            t = make(k)
            if k == 7:
                t = t.clone().view(-1)
                t[0] = float("nan")
                t = t.view_as(make(k))
            checks.add(k, t)
        checks.flush()
        assert builder.nonfinite == [7]


class _Counting:
    """torch, counting which of its functions the checks call (they take the module as an argument)."""

    def __init__(self):
        self.used = []

    def __getattr__(self, name):
        self.used.append(name)
        return getattr(torch, name)


@pytest.mark.parametrize("where", [0, 9, -1])
def test_norms_of_a_long_chain_with_the_loss_gradient_among_them_take_the_stack(where):
    # a chain's gradients are all one shape but for the 0-d loss's: it is taken apart, the rest stay one stack
    tensors = [torch.full((4,), float(k)) for k in range(_ATTEMPT + 2)]
    tensors.insert(where if where >= 0 else len(tensors), torch.tensor(-3.0))
    tensors[20] = torch.tensor([float("nan"), 0.0, 0.0, 0.0])
    counting = _Counting()
    got = norms(counting, tensors)
    assert "_foreach_norm" not in counting.used and counting.used.count("stack") == 2
    for k, (t, value) in enumerate(zip(tensors, got)):
        assert _close(value, _expected(t)), (k, value)
    assert got[where] == 3.0 and math.isnan(got[20])


def test_norms_with_many_0d_among_alike_tensors_still_match():
    tensors = [torch.full((4,), 1.0) for _ in range(_ATTEMPT)] + [torch.tensor(-float(k)) for k in range(5)]
    got = norms(torch, tensors)
    assert got == [2.0] * _ATTEMPT + [float(k) for k in range(5)]


@pytest.mark.parametrize("bad_at", ["loss", "chain", None])
def test_output_checks_of_a_long_chain_ending_in_a_0d_loss(bad_at):
    builder = _Builder()
    counting = _Counting()
    checks = OutputChecks(counting, builder)
    for k in range(_ATTEMPT + 3):
        checks.add(k, torch.tensor([0.0, float("inf"), 1.0]) if bad_at == "chain" and k == 30 else torch.ones(3))
    checks.add("loss", torch.tensor(float("nan") if bad_at == "loss" else 2.0))
    checks.flush()
    assert builder.nonfinite == {"loss": ["loss"], "chain": [30], None: []}[bad_at]
    if bad_at is None:  # all finite: one concatenation of the shaped outputs and one stack of the loss
        assert counting.used.count("cat") == 2 and counting.used.count("stack") == 1


@pytest.mark.parametrize("bad", [None, 3, "loss"])
def test_output_checks_of_a_few_small_outputs_of_mixed_shapes_take_one_concatenation(bad):
    # an MLP step's activations and its 0-d loss: flattened into one concatenation while all finite
    builder = _Builder()
    counting = _Counting()
    checks = OutputChecks(counting, builder)
    shapes = {0: (64, 256), 1: (64, 256), 2: (64, 128), 3: (64, 10), "loss": ()}
    for key, shape in shapes.items():
        t = torch.ones(shape)
        if key == bad:
            t.view(-1)[-1] = float("nan")
        checks.add(key, t)
    checks.flush()
    assert builder.nonfinite == ([] if bad is None else [bad])
    if bad is None:
        assert counting.used == ["cat"]
