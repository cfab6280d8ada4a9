"""The engine's PyTorch semantics, one behaviour per test: errors (type and message), requires_grad and volatile
propagation, .grad rules, hooks, accumulation, graph shapes that break naive engines, grad modes, factories."""

import gc
import warnings

import numpy as np
import pytest

import gradviz as gv
import gradviz.autograd.variable as variable_module
from gradviz.autograd import Variable as AutogradVariable
from gradviz.errors import (
    DtypeError,
    GraphFreedError,
    LeafInplaceError,
    NoGradFnError,
    NonScalarBackwardError,
    ShapeError,
    StaleVersionError,
)


def leaf(*shape, value=None):
    data = np.arange(1.0, 1.0 + np.prod(shape)).reshape(shape) if value is None else np.full(shape, value)
    return gv.tensor(data, dtype=gv.float64, requires_grad=True)


# ----- every error of the engine issue ------------------------------------------------------------------------
def test_non_scalar_backward():
    y = leaf(3) * 2
    with pytest.raises(NonScalarBackwardError, match=r"^grad can be implicitly created only for scalar outputs$"):
        y.backward()
    with pytest.raises(RuntimeError, match="only for scalar outputs"):
        y.backward(gradient=None)
    assert y.grad_fn is not None  # nothing ran


def test_backward_twice_without_retain_graph():
    x = leaf(3)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(GraphFreedError, match=r"^Trying to backward through the graph a second time \(or directly "
                                              r"access saved tensors after they have already been freed\)"):
        y.backward()
    assert isinstance(GraphFreedError(y.grad_fn), RuntimeError)
    np.testing.assert_array_equal(x.grad.numpy(), [2, 4, 6])  # the failed call added nothing


def test_backward_twice_with_retain_graph_accumulates():
    x = leaf(3)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [4, 8, 12])


def test_graph_without_saved_tensors_can_run_twice():
    x = leaf(3)
    y = (x + 1).sum()
    y.backward()
    y.backward()  # as in PyTorch: AddBackward and SumBackward save nothing
    np.testing.assert_array_equal(x.grad.numpy(), [2, 2, 2])


@pytest.mark.parametrize("op, node", [(lambda x: x.exp(), "ExpBackward"), (lambda x: x.sigmoid(), "SigmoidBackward"),
                                      (lambda x: x.relu(), "ReluBackward"), (lambda x: x.tanh(), "TanhBackward")])
def test_modified_saved_output(op, node):
    y = op(leaf(2, 3))
    y.add_(1)
    with pytest.raises(StaleVersionError) as err:
        y.sum().backward()
    assert str(err.value).startswith(
        "one of the variables needed for gradient computation has been modified by an inplace operation: "
        f"[torch.DoubleTensor [2, 3]], which is output 0 of {node}, is at version 1; expected version 0 instead.")
    assert (err.value.expected, err.value.current, err.value.node.name()) == (0, 1, node)


def test_modified_saved_input_names_the_op_that_saved_it():
    x = leaf(4)
    y = x * 1
    z = y * y
    y[1:].mul_(2)  # through a view: the base's counter moves
    with pytest.raises(StaleVersionError, match=r"\[torch.DoubleTensor \[4\]\], which is input 0 of MulBackward, is "
                                                r"at version 1; expected version 0 instead"):
        z.sum().backward()


def test_reading_saved_tensors_checks_the_version():
    class Keep(gv.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * 2

    y = leaf(2) * 1
    out = Keep.apply(y)
    assert len(out.grad_fn.saved_tensors) == 1
    y.add_(1)
    with pytest.raises(StaleVersionError, match="is at version 1; expected version 0"):
        out.grad_fn.saved_tensors  # noqa: B018 - reading is what raises


def test_data_does_not_count_as_a_use():
    x = leaf(3)
    y = x.exp()
    y.data.mul_(0)  # invisible to autograd: the gradient uses the modified values, no error (as PyTorch)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0, 0, 0])


def test_detach_shares_the_version_counter():
    x = leaf(3)
    y = x.exp()
    d = y.detach()
    assert np.shares_memory(d.numpy(), y.detach().numpy()) and not d.requires_grad
    d.add_(1)
    assert (y._version, d._version, y.version) == (1, 1, 1)
    with pytest.raises(StaleVersionError):
        y.sum().backward()


def test_data_has_its_own_version_counter():
    x = leaf(3)
    d = x.data
    d.add_(1)
    assert (x._version, d._version) == (0, 1)
    np.testing.assert_array_equal(x.detach().numpy(), [2, 3, 4])
    assert "detach()" in variable_module.__doc__ and ".data" in variable_module.__doc__


def test_leaf_inplace():
    x = leaf(3)
    with pytest.raises(LeafInplaceError, match=r"^a leaf Variable that requires grad is being used in an in-place "
                                               r"operation\."):
        x.add_(1)
    with pytest.raises(LeafInplaceError, match="^a leaf Variable"):
        x += 1
    assert x._version == 0


def test_view_of_leaf_inplace():
    x = leaf(2, 3)
    with pytest.raises(LeafInplaceError, match=r"^a view of a leaf Variable that requires grad is being used in an "
                                               r"in-place operation\."):
        x[0].mul_(2)
    with pytest.raises(LeafInplaceError, match="^a view of a leaf Variable"):
        x[0] = 1.0
    with pytest.raises(LeafInplaceError, match="^a view of a leaf Variable"):
        x.t().zero_()


def test_leaf_inplace_allowed_under_no_grad():
    x = leaf(3)
    with gv.no_grad():
        x.mul_(2)
        x[0] = 0.0
    assert x._version == 2 and x.is_leaf and x.grad_fn is None
    np.testing.assert_array_equal(x.detach().numpy(), [0, 4, 6])


def test_backward_without_grad_fn():
    with pytest.raises(NoGradFnError, match=r"^element 0 of tensors does not require grad and does not have a "
                                            r"grad_fn$"):
        gv.ones(3).sum().backward()
    with pytest.raises(NoGradFnError, match="^element 1 of tensors"):
        gv.autograd.backward([leaf(1).sum(), gv.ones(1).sum()])


def test_requires_grad_on_integer_tensor():
    for make in (lambda: gv.tensor([1, 2]), lambda: gv.arange(3), lambda: gv.ones(2, dtype=gv.bool)):
        with pytest.raises(DtypeError, match="^only Tensors of floating point and complex dtype can require "
                                             "gradients"):
            make().requires_grad = True
        with pytest.raises(DtypeError, match="^only Tensors of floating point dtype can require gradients"):
            make().requires_grad_()
    with pytest.raises(RuntimeError, match="only Tensors of floating point"):
        gv.tensor([1, 2], requires_grad=True)


def test_gradient_shape_mismatch():
    y = leaf(3) * 2
    with pytest.raises(ShapeError, match=r"^Mismatch in shape: grad_output\[0\] has a shape of torch.Size\(\[2\]\) "
                                         r"and output\[0\] has a shape of torch.Size\(\[3\]\)\.$"):
        y.backward(gv.ones(2, dtype=gv.float64))


def test_requires_grad_flags_of_non_leaves():
    y = leaf(2) * 2
    with pytest.raises(RuntimeError, match=r"^you can only change requires_grad flags of leaf variables\. If you "
                                           r"want to use a computed variable"):
        y.requires_grad = False
    with pytest.raises(RuntimeError, match=r"^you can only change requires_grad flags of leaf variables\.$"):
        y.requires_grad = True
    assert y.requires_grad_() is y  # a no-op, as in PyTorch


def test_assigning_a_wrong_grad():
    x = leaf(3)
    with pytest.raises(RuntimeError, match=r"^attempting to assign a gradient of size '\[2\]' to a tensor of size "
                                           r"'\[3\]'"):
        x.grad = gv.ones(2)
    with pytest.raises(TypeError, match="^assigned grad expected to be a Tensor or None but got grad of type list"):
        x.grad = [1.0, 2.0, 3.0]


def test_hooks_and_retain_grad_need_requires_grad():
    with pytest.raises(RuntimeError, match="^cannot register a hook on a tensor that doesn't require gradient$"):
        gv.ones(2).register_hook(lambda g: g)
    with pytest.raises(RuntimeError, match="^can't retain_grad on Tensor that has requires_grad=False$"):
        gv.ones(2).retain_grad()


def test_numpy_of_a_tensor_that_requires_grad():
    with pytest.raises(RuntimeError, match=r"^Can't call numpy\(\) on Tensor that requires grad\. Use "
                                           r"tensor\.detach\(\)\.numpy\(\) instead\.$"):
        leaf(2).numpy()


def test_autograd_grad_errors():
    x, unused, frozen = leaf(2), leaf(2), gv.ones(2)
    with pytest.raises(RuntimeError, match=r"^The differentiated Tensor at index 1 appears to not have been used in "
                                           r"the graph\. Set allow_unused=True"):
        gv.autograd.grad((x * 2).sum(), [x, unused])
    with pytest.raises(RuntimeError, match="^One of the differentiated Tensors does not require grad"):
        gv.autograd.grad((x * 2).sum(), [x, frozen])


def test_scalar_conversion_errors():
    with pytest.raises(ValueError, match="^only one element tensors can be converted to Python scalars$"):
        float(leaf(2))
    with pytest.raises(RuntimeError, match="^a Tensor with 2 elements cannot be converted to Scalar$"):
        leaf(2).item()


# ----- requires_grad, volatile, creator --------------------------------------------------------------------
def test_requires_grad_propagation_from_the_seed():
    x, y = gv.Variable(gv.randn(5, 5)), gv.Variable(gv.randn(5, 5))
    z = gv.Variable(gv.randn(5, 5), requires_grad=True)
    a = x + y
    assert a.requires_grad is False and a.grad_fn is None and a.is_leaf
    b = a + z
    assert b.requires_grad is True and b.grad_fn.name() == "AddBackward" and not b.is_leaf


def test_volatile_spreads_and_warns_once(monkeypatch):
    monkeypatch.setattr(variable_module, "_warned_volatile", False)
    regular = gv.Variable(gv.randn(5, 5))
    with pytest.warns(DeprecationWarning, match=r"volatile is deprecated: use `with gradviz.no_grad\(\):`"):
        volatile_input = gv.Variable(gv.randn(5, 5), volatile=True)
    weight = gv.Variable(gv.randn(5, 5), requires_grad=True)

    def model(inp):
        return (inp @ weight).relu().sum(dim=1)

    assert model(regular).requires_grad is True
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second volatile Variable must not warn again
        out = model(volatile_input)
        gv.Variable(gv.randn(2), volatile=True)
    assert out.requires_grad is False and out.volatile is True and out.creator is None and out.grad_fn is None
    assert model(regular).volatile is False


def test_creator_is_grad_fn():
    y = leaf(2) * 3
    assert y.creator is y.grad_fn and y.creator.name() == "MulBackward"
    assert leaf(2).creator is None


def test_variable_importable_from_autograd():
    assert AutogradVariable is gv.Variable is gv.Tensor
    v = AutogradVariable(gv.ones(2), requires_grad=True)
    assert v.requires_grad and v.dtype == gv.float32


def test_seed_variable_of_data_is_a_fresh_leaf():
    y1 = leaf(3) ** 3
    v = gv.Variable(y1.data, requires_grad=True)
    assert v.is_leaf and v.requires_grad and v.grad_fn is None
    (v * 2).sum().backward()
    np.testing.assert_array_equal(v.grad.numpy(), [2, 2, 2])


# ----- .grad ---------------------------------------------------------------------------------------------
def test_non_leaf_grad_warns_and_is_none():
    x = leaf(2)
    y = x * 2
    y.sum().backward()
    with pytest.warns(UserWarning, match=r"^The \.grad attribute of a Tensor that is not a leaf Tensor is being "
                                         r"accessed\. Its \.grad attribute won't be populated during "
                                         r"autograd\.backward\(\)\. If you indeed want the \.grad field"):
        assert y.grad is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert x.grad is not None  # leaves do not warn


def test_retain_grad():
    x = leaf(3)
    y = x * 2
    z = y * y
    assert not y.retains_grad
    y.retain_grad()
    assert y.retains_grad and not x.retains_grad and not z.retains_grad
    z.sum().backward()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(y.grad.numpy(), 2 * y.detach().numpy())
    np.testing.assert_array_equal(x.grad.numpy(), 8 * x.detach().numpy())


def test_grad_is_assignable_on_leaf_and_non_leaf():
    x = leaf(2)
    (x * 3).sum().backward()
    x.grad = None
    assert x.grad is None
    (x * 3).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3, 3])
    y = x * 2
    y.grad = gv.ones(2, dtype=gv.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(y.grad.numpy(), [1, 1])


def test_gradients_accumulate_across_backward_calls():
    x = leaf(2)
    for k in range(1, 4):
        (x * x).sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), k * 2 * x.detach().numpy())


def test_grad_keeps_the_leaf_dtype():
    x = gv.ones(3, requires_grad=True)
    (x.double() * 2).sum().backward()
    assert x.grad.dtype == gv.float32


# ----- hooks -----------------------------------------------------------------------------------------------
def test_hook_replaces_the_gradient_and_can_be_removed():
    x = leaf(3)
    y = x * 2
    seen = []
    handle = y.register_hook(lambda g: seen.append(g.numpy().copy()) or g * 10)
    y.sum().backward(retain_graph=True)
    np.testing.assert_array_equal(seen[0], [1, 1, 1])
    np.testing.assert_array_equal(x.grad.numpy(), [20, 20, 20])
    handle.remove()
    x.grad = None
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2, 2, 2])
    assert len(seen) == 1


def test_hook_returning_none_keeps_the_gradient():
    x = leaf(2)
    calls = []
    x.register_hook(lambda g: calls.append(g.numpy().copy()))
    (x * 5).sum().backward()
    np.testing.assert_array_equal(calls[0], [5, 5])
    np.testing.assert_array_equal(x.grad.numpy(), [5, 5])


def test_hooks_on_leaves_run_before_accumulation():
    x = leaf(2)
    x.register_hook(lambda g: g + 1)
    x.register_hook(lambda g: g * 2)
    (x * 3).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [8, 8])  # (3 + 1) * 2


def test_hook_must_not_change_the_shape():
    y = leaf(2) * 1
    y.register_hook(lambda g: gv.ones(3))
    with pytest.raises(RuntimeError, match="has changed the size of value"):
        y.sum().backward()


def test_hook_extraction_from_the_seed():
    def extract(v):
        def hook(grad):
            v.grad = grad
        return hook

    x = leaf(3)
    y1 = x.pow(3)
    y1.register_hook(extract(y1))
    ((y1 / 2) ** 2).mean().backward(retain_graph=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_allclose(y1.grad.numpy(), (y1.detach().numpy() / 2) / 3)


# ----- graph shapes ---------------------------------------------------------------------------------------------
def test_a_plus_a():
    a = leaf(3)
    (a + a).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [2, 2, 2])


def test_diamond():
    x = leaf(2)
    top = x * 3
    left, right = top.exp(), top * top
    (left + right).sum().backward()
    t = 3 * x.detach().numpy()
    np.testing.assert_allclose(x.grad.numpy(), 3 * np.exp(t) + 3 * 2 * t)


def test_diamond_with_shared_intermediate_used_three_times():
    x = leaf(1, value=2.0)
    y = x * x
    (y + y * y + y.sin()).sum().backward()
    v = 2.0
    np.testing.assert_allclose(x.grad.numpy(), [2 * v + 4 * v ** 3 + np.cos(v ** 2) * 2 * v])


def test_ten_thousand_op_chain_has_no_recursion_limit():
    x = leaf(1, value=1.0)
    y = x
    for _ in range(10_000):
        y = y * 1.0001
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [1.0001 ** 10_000], rtol=1e-9)


def test_topological_order_not_creation_order():
    x = leaf(1, value=3.0)
    late = x * 2
    early_use = late + 1
    (early_use * late).sum().backward()  # d/dx (2x+1)(2x) = 8x + 2
    np.testing.assert_allclose(x.grad.numpy(), [26.0])


# ----- grad modes ------------------------------------------------------------------------------------------
def test_no_grad_and_enable_grad_context_managers():
    x = leaf(2)
    with gv.no_grad():
        assert not gv.is_grad_enabled()
        y = x * 2
        with gv.enable_grad():
            assert gv.is_grad_enabled()
            z = x * 2
    assert gv.is_grad_enabled()
    assert (y.requires_grad, y.grad_fn, z.requires_grad) == (False, None, True)


def test_grad_modes_as_decorators():
    x = leaf(2)

    @gv.no_grad()
    def frozen(v):
        return v * 2

    @gv.enable_grad()
    def live(v):
        return v * 2

    assert frozen(x).requires_grad is False
    with gv.no_grad():
        assert live(x).requires_grad is True
    assert gv.is_grad_enabled()


def test_set_grad_enabled():
    x = leaf(2)
    with gv.set_grad_enabled(False):
        assert (x * 2).requires_grad is False
    assert gv.is_grad_enabled()
    gv.set_grad_enabled(False)
    try:
        assert not gv.is_grad_enabled() and (x * 2).grad_fn is None
    finally:
        gv.set_grad_enabled(True)
    assert gv.is_grad_enabled()

    @gv.set_grad_enabled(False)
    def f(v):
        return v * 2

    assert gv.is_grad_enabled() and f(x).requires_grad is False


def test_no_grad_restores_mode_after_an_exception():
    with pytest.raises(ValueError):
        with gv.no_grad():
            raise ValueError
    assert gv.is_grad_enabled()


# ----- autograd.backward / grad ------------------------------------------------------------------------------
def test_autograd_backward_sums_roots():
    x = leaf(2)
    gv.autograd.backward([(x * x).sum(), x * 3], [None, gv.tensor([1.0, 2.0], dtype=gv.float64)])
    np.testing.assert_array_equal(x.grad.numpy(), 2 * x.detach().numpy() + [3, 6])


def test_autograd_grad_leaves_dot_grad_alone():
    x, w = leaf(2), leaf(2)
    gx, gw = gv.autograd.grad((x * w).sum(), [x, w])
    np.testing.assert_array_equal(gx.numpy(), w.detach().numpy())
    np.testing.assert_array_equal(gw.numpy(), x.detach().numpy())
    assert x.grad is None and w.grad is None


def test_autograd_grad_allow_unused_and_intermediate_inputs():
    x, unused = leaf(2), leaf(2)
    y = x * 2
    gy, gx, gu = gv.autograd.grad((y * y).sum(), [y, x, unused], allow_unused=True)
    np.testing.assert_array_equal(gy.numpy(), 2 * y.detach().numpy())
    np.testing.assert_array_equal(gx.numpy(), 4 * y.detach().numpy())
    assert gu is None


# ----- values, factories and dtypes -------------------------------------------------------------------------
def test_python_scalars_from_one_element_variables():
    v = leaf(1, value=2.5) * 2
    assert float(v) == 5.0 and int(v) == 5 and v.item() == 5.0 and isinstance(v.item(), float)
    assert int(gv.tensor([[7]])) == 7 and float(gv.tensor(3.5)) == 3.5


def test_comparisons_and_argmax_never_require_grad():
    x = leaf(2, 3)
    for out in (x > 1, x < 2, x >= x, x <= 0, x == x, x != 1, x.argmax(), x.argmax(dim=1), x.argmin(0),
                x.max(dim=1).indices, gv.argmax(x)):
        assert out.requires_grad is False and out.grad_fn is None
    assert (x > 1).dtype == gv.bool and x.argmax().dtype == gv.int64
    assert x.argmax(dim=1).tolist() == [2, 2]


def test_variables_are_hashable():
    a, b = leaf(2), leaf(2)
    table = {a: "a", b: "b"}
    assert table[a] == "a" and len({a, b, a}) == 2 and a in {a}
    assert (a == b).dtype == gv.bool  # == stays elementwise


def test_factories_and_default_dtypes():
    assert gv.zeros(2, 3).dtype == gv.float32 and gv.zeros(2, 3).shape == (2, 3)
    assert gv.ones((2,)).dtype == gv.float32 and gv.empty(4).shape == (4,)
    assert gv.tensor([1.0, 2.0]).dtype == gv.float32 and gv.tensor([1, 2]).dtype == gv.int64
    assert gv.tensor(np.ones(2)).dtype == gv.float64  # numpy float64 keeps its dtype, as torch.tensor does
    assert gv.tensor([True]).dtype == gv.bool
    assert gv.full((2, 2), 3.0).dtype == gv.float32 and gv.full((2,), 3).dtype == gv.int64
    assert gv.eye(3).numpy().tolist() == np.eye(3).tolist()
    assert gv.arange(4).tolist() == [0, 1, 2, 3] and gv.arange(4).dtype == gv.int64
    assert gv.arange(0, 1, 0.5).dtype == gv.float32
    assert np.allclose(gv.linspace(0, 1, 5).numpy(), [0, 0.25, 0.5, 0.75, 1])
    assert gv.zeros_like(gv.ones(2, dtype=gv.float64)).dtype == gv.float64
    assert gv.ones_like(gv.ones(3)).tolist() == [1, 1, 1]
    assert gv.randint(0, 5, (100,)).dtype == gv.int64 and 0 <= gv.randint(0, 5, (100,)).min().item() <= 4
    assert gv.rand(3, 2).shape == (3, 2) and gv.randn(2).dtype == gv.float32
    assert gv.zeros(2, requires_grad=True).requires_grad
    assert gv.tensor([1.0], dtype=gv.float64).dtype == np.float64 == gv.double


def test_manual_seed_reproduces():
    gv.manual_seed(3)
    a = gv.randn(4).tolist()
    gv.manual_seed(3)
    assert gv.randn(4).tolist() == a


def test_casts_and_attributes():
    x = gv.ones(2, 3, requires_grad=True)
    d = x.double()
    assert d.dtype == gv.float64 and d.grad_fn.name() == "CastBackward"
    assert x.to(gv.float64).dtype == gv.float64 and x.float() is x
    assert (x.shape, x.ndim, x.size(), x.size(1), x.numel(), x.T.shape) == ((2, 3), 2, (2, 3), 3, 6, (3, 2))
    assert gv.Variable(gv.ones(1), name="w").name == "w"


# ----- freezing ------------------------------------------------------------------------------------------------
def test_frozen_weights_get_no_grad_and_no_saved_buffers():
    w_frozen = gv.randn(4, 3, dtype=gv.float64, requires_grad=True)
    w_frozen.requires_grad = False
    w_head = gv.randn(3, 2, dtype=gv.float64, requires_grad=True)
    x = gv.randn(5, 4, dtype=gv.float64)
    hidden = (x @ w_frozen).relu()
    assert hidden.requires_grad is False and hidden.grad_fn is None  # nothing recorded, nothing saved
    out = hidden @ w_head
    saved = out.grad_fn.saved
    # Only the input needed for w_head's gradient is kept; nothing for the frozen branch.
    assert [(s.kind, s.index) for s in saved if s.data is not None] == [("input", 0)]
    assert out.grad_fn.next_functions[0] == (None, 0)
    out.sum().backward()
    assert w_frozen.grad is None and w_head.grad is not None


def test_mul_by_frozen_weight_saves_only_what_backward_needs():
    x = leaf(3)
    w = gv.ones(3, dtype=gv.float64)  # does not require grad
    node = (x * w).grad_fn
    kept = [s for s in node.saved if s.data is not None]
    assert len(kept) == 1 and kept[0].variable is w  # w for x's gradient; x itself is not kept
    assert node.needs_input_grad == (True, False)


def test_saved_records_know_versions_and_sizes():
    x = leaf(2, 3)
    y = x.exp()
    (rec,) = y.grad_fn.saved
    assert (rec.kind, rec.version, rec.nbytes) == ("output", 0, 2 * 3 * 8)
    y.sum().backward()
    assert y.grad_fn.freed and y.grad_fn.saved == ()


def test_graph_is_released_with_its_outputs():
    x = leaf(2)
    y = (x * 2).exp()
    ref = __import__("weakref").ref(y.grad_fn)
    del y
    gc.collect()
    assert ref() is None
