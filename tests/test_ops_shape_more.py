"""Views, rearrangements and index-driven selection, against PyTorch: values, dtypes, gradients and error text;
and the new views share storage and the version counter with their base as PyTorch's do."""

import numpy as np
import pytest

import gradviz as gv

from .oracle_ops import compare, same_error


def _r(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


IDX = np.array([[0, 3, 3], [1, 0, 2], [2, 2, 1]])
PERM_IDX = np.array([[0, 3], [1, 0], [2, 1]])

CASES = {
    "narrow": (lambda L, x: x.narrow(1, 1, 2), _r(3, 4)),
    "narrow negative start": (lambda L, x: L.narrow(x, 0, -2, 2), _r(3, 4)),
    "split int": (lambda L, x: x.split(2, dim=1), _r(3, 5)),
    "split sizes": (lambda L, x: L.split(x, [1, 0, 3], 1), _r(3, 4)),
    "chunk": (lambda L, x: x.chunk(3), _r(7, 2)),
    "chunk fewer pieces": (lambda L, x: L.chunk(x, 4, dim=1), _r(2, 6)),
    "unbind": (lambda L, x: x.unbind(1), _r(3, 4)),
    "movedim": (lambda L, x: L.movedim(x, (0, -1), (2, 0)), _r(2, 3, 4)),
    "moveaxis": (lambda L, x: x.moveaxis(1, 0), _r(2, 3, 4)),
    "unflatten": (lambda L, x: x.unflatten(-1, (2, -1)), _r(3, 6)),
    "diagonal": (lambda L, x: L.diagonal(x, 1, 1, 2), _r(2, 3, 4)),
    "diagonal negative": (lambda L, x: x.diagonal(-1), _r(4, 3)),
    "repeat": (lambda L, x: x.repeat(2, 1, 3), _r(2, 3)),
    "tile": (lambda L, x: L.tile(x, (2,)), _r(2, 3)),
    "tile more dims": (lambda L, x: x.tile(2, 1, 2), _r(2, 3)),
    "repeat_interleave": (lambda L, x: x.repeat_interleave(2, dim=0), _r(2, 3)),
    "repeat_interleave flat": (lambda L, x: L.repeat_interleave(x, 2), _r(2, 3)),
    "repeat_interleave counts": (lambda L, x, r: x.repeat_interleave(r, dim=1), _r(2, 3), np.array([1, 0, 3])),
    "flip": (lambda L, x: x.flip(0, 2), _r(2, 3, 4)),
    "roll": (lambda L, x: L.roll(x, 3), _r(3, 4)),
    "roll dims": (lambda L, x: x.roll((1, -2), (0, 1)), _r(3, 4)),
    "cat mixed dtypes": (lambda L, x, i: L.cat([x, i, x.float()], 1), _r(2, 3), np.ones((2, 1), dtype=np.int64)),
    "cat long and bool": (lambda L, i, b: L.cat([i, b]), np.arange(3), np.array([True, False])),
    "stack mixed dtypes": (lambda L, x, i: L.stack([i, x], dim=1), _r(2, 3), np.ones((2, 3), dtype=np.int64)),
    "stack 0-d": (lambda L, x: L.stack([x[0, 0], x[1, 1]]), _r(2, 2)),
    "gather": (lambda L, x, i: x.gather(1, i), _r(3, 4), IDX),
    "gather smaller index": (lambda L, x, i: L.gather(x, 0, i), _r(3, 4), IDX[:2, :2] % 3),
    "scatter": (lambda L, x, i, s: x.scatter(1, i, s), _r(3, 4), PERM_IDX, _r(3, 2, seed=1)),
    "scatter value": (lambda L, x, i: L.scatter(x, 1, i, value=-1.5), _r(3, 4), PERM_IDX),
    "scatter_add": (lambda L, x, i, s: x.scatter_add(1, i, s), _r(3, 4), IDX, _r(3, 3, seed=1)),
    "index_select": (lambda L, x, i: L.index_select(x, 1, i), _r(3, 4), np.array([3, 0, 3])),
    "index_add": (lambda L, x, i, s: x.index_add(0, i, s, alpha=-2), _r(3, 4), np.array([2, 2]), _r(2, 4, seed=1)),
    "take_along_dim": (lambda L, x, i: L.take_along_dim(x, i, dim=1), _r(3, 4), np.array([[1], [3], [0]])),
    "take_along_dim broadcast": (lambda L, x, i: L.take_along_dim(x, i, 0), _r(3, 4), np.array([[2], [0]])),
    "take_along_dim flat": (lambda L, x, i: L.take_along_dim(x, i), _r(3, 4), np.array([11, 0, 11])),
    "split then in-place on a piece without grad": (lambda L, x: _write_piece(L, x), _r(4, 3)),
}


def _write_piece(lib, x):
    y = x * 1
    with lib.no_grad():
        y.split(2)[1].mul_(3)
    return y


@pytest.mark.oracle
@pytest.mark.parametrize("name", CASES)
def test_matches_pytorch(name):
    pytest.importorskip("torch")
    fn, *arrays = CASES[name]
    compare(fn, *arrays)


ERRORS = {
    "narrow dim": (lambda L, x: x.narrow(2, 0, 1), _r(3, 4)),
    "narrow too long": (lambda L, x: x.narrow(1, 3, 2), _r(3, 4)),
    "split sizes": (lambda L, x: x.split([1, 2], 1), _r(3, 4)),
    "split zero": (lambda L, x: x.split(0), _r(3, 4)),
    "chunk zero": (lambda L, x: x.chunk(0), _r(3, 4)),
    "unflatten sizes": (lambda L, x: x.unflatten(1, (3, 2)), _r(3, 4)),
    "movedim repeated": (lambda L, x: x.movedim((0, 1), (1, 1)), _r(3, 4)),
    "movedim dim": (lambda L, x: x.movedim(3, 0), _r(3, 4)),
    "repeat too few": (lambda L, x: x.repeat(2), _r(3, 4)),
    "repeat_interleave counts": (lambda L, x, r: x.repeat_interleave(r, dim=0), _r(3, 4), np.array([1, 2])),
    "flip twice": (lambda L, x: L.flip(x, (0, 0)), _r(3, 4)),
    "roll misaligned": (lambda L, x: x.roll(1, (0, 1)), _r(3, 4)),
    "cat shapes": (lambda L, x, y: L.cat([x, y]), _r(3, 4), _r(2, 3)),
    "cat 0-d": (lambda L, x: L.cat([x, x[0, 0]]), _r(3, 4)),
    "stack shapes": (lambda L, x, y: L.stack([x, y]), _r(3, 4), _r(2, 3)),
    "gather index dtype": (lambda L, x, i: x.gather(1, i), _r(3, 4), np.array([[0.0, 1.0]])),
    "gather index rank": (lambda L, x, i: x.gather(1, i), _r(3, 4), np.array([0, 1])),
    "gather out of bounds": (lambda L, x, i: x.gather(1, i), _r(3, 4), np.array([[0, 4]])),
    "gather negative": (lambda L, x, i: x.gather(1, i), _r(3, 4), np.array([[-1]])),
    "gather index too large": (lambda L, x, i: x.gather(1, i), _r(3, 4), np.zeros((4, 1), dtype=np.int64)),
    "scatter dtype": (lambda L, x, i, s: x.scatter(1, i, s.float()), _r(3, 4), PERM_IDX, _r(3, 2)),
    "scatter out of bounds": (lambda L, x, i: x.scatter(1, i, 1.0), _r(3, 4), np.full((3, 1), 7)),
    "index_select matrix index": (lambda L, x, i: x.index_select(1, i), _r(3, 4), np.array([[0]])),
    "index_select float index": (lambda L, x, i: x.index_select(1, i), _r(3, 4), np.array([0.0])),
    "index_select out of bounds": (lambda L, x, i: x.index_select(1, i), _r(3, 4), np.array([5])),
    "index_add shapes": (lambda L, x, i, s: x.index_add(0, i, s), _r(3, 4), np.array([0, 0]), _r(2, 3)),
    "index_add count": (lambda L, x, i, s: x.index_add(0, i, s), _r(3, 4), np.array([0, 1]), _r(1, 4)),
    "index_add dtype": (lambda L, x, i, s: x.index_add(0, i, s.float()), _r(3, 4), np.array([0]), _r(1, 4)),
    "take_along_dim ranks": (lambda L, x, i: L.take_along_dim(x, i, 1), _r(3, 4), np.array([0])),
    "take_along_dim sizes": (lambda L, x, i: L.take_along_dim(x, i, 1), _r(3, 4), np.array([[0], [1]])),
}


@pytest.mark.oracle
@pytest.mark.parametrize("name", ERRORS)
def test_error_matches_pytorch(name):
    pytest.importorskip("torch")
    fn, *arrays = ERRORS[name]
    same_error(fn, *arrays)


@pytest.mark.oracle
def test_sort_like_integer_results_do_not_require_grad():
    torch = pytest.importorskip("torch")
    x = _r(3, 4)
    ours, theirs = compare(lambda L, x: x.sort(0, descending=True), x)
    assert ours[1].dtype == gv.int64 and not ours[1].requires_grad
    assert torch.equal(theirs[1], torch.tensor(ours[1].numpy()))


# ----- views share storage and the version counter -------------------------------------------------------------
SINGLE_VIEWS = {
    "narrow": lambda x: x.narrow(1, 1, 2),
    "movedim": lambda x: x.movedim(0, 1),
    "unflatten": lambda x: x.unflatten(1, (2, 2)),
    "diagonal": lambda x: x.diagonal(1),
}
MULTI_VIEWS = {
    "split": lambda x: x.split(2, 1)[1],
    "split sizes": lambda x: x.split([1, 3], 1)[1],
    "chunk": lambda x: x.chunk(2, 1)[0],
    "unbind": lambda x: x.unbind(0)[1],
    "narrow of a split piece": lambda x: x.split(2, 1)[1].narrow(0, 1, 1),
}
VIEWS = {**SINGLE_VIEWS, **MULTI_VIEWS}


@pytest.mark.parametrize("name", VIEWS)
def test_view_shares_storage_and_version_with_its_base(name):
    base = gv.tensor(_r(3, 4))
    view = VIEWS[name](base)
    assert view._base is base and view.is_view()
    before = base._version
    view.add_(1.0)
    assert base._version == view._version == before + 1
    expected = VIEWS[name](gv.tensor(_r(3, 4))).numpy() + 1.0
    np.testing.assert_array_equal(VIEWS[name](base).numpy(), expected)
    base.mul_(2.0)
    assert view._version == base._version == before + 2
    np.testing.assert_array_equal(view.numpy(), expected * 2)


@pytest.mark.oracle
@pytest.mark.parametrize("name", MULTI_VIEWS)
def test_inplace_on_one_of_several_views_is_refused_like_pytorch(name):
    torch = pytest.importorskip("torch")
    messages = []
    for lib in (gv, torch):
        base = lib.tensor(_r(3, 4), requires_grad=True) * 1
        with pytest.raises(RuntimeError) as info:
            MULTI_VIEWS[name](base).mul_(2.0)
        messages.append(str(info.value))
    assert messages[0] == messages[1]


@pytest.mark.oracle
@pytest.mark.parametrize("name", SINGLE_VIEWS)
def test_inplace_through_a_view_rewrites_the_base_history_like_pytorch(name):
    torch = pytest.importorskip("torch")
    a = _r(3, 4)
    results = []
    for lib in (gv, torch):
        leaf = lib.tensor(a, requires_grad=True)
        base = leaf * 1
        view = SINGLE_VIEWS[name](base)
        view.mul_(3.0)
        results.append((leaf, base, view))
        assert "CopySlices" in base.grad_fn.name()
        (base * base).sum().backward()
    (ours_leaf, ours_base, ours_view), (t_leaf, t_base, t_view) = results
    np.testing.assert_allclose(ours_base.detach().numpy(), t_base.detach().numpy())
    np.testing.assert_allclose(ours_leaf.grad.numpy(), t_leaf.grad.numpy())
    assert ours_base._version == t_base._version


def test_saved_input_changed_through_a_narrow_view_is_caught():
    x = gv.tensor(_r(3, 4), requires_grad=True)
    y = x * 1
    z = y.sigmoid() * y  # the product saves y
    y.narrow(0, 0, 1).zero_()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()


def test_a_view_of_a_leaf_refuses_in_place_writes():
    x = gv.tensor(_r(3, 4), requires_grad=True)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
        x.unbind(0)[0].add_(1)


def test_index_changed_in_place_before_backward_is_caught():
    x = gv.tensor(_r(3, 4), requires_grad=True)
    index = gv.tensor(IDX)
    out = x.gather(1, index)
    index.add_(0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


def test_inplace_scatter_and_index_add_bump_the_version_and_record_the_op():
    x = gv.tensor(_r(3, 4), requires_grad=True)
    y = x * 1
    y.scatter_(1, gv.tensor(PERM_IDX), gv.ones(3, 2, dtype=gv.float64))
    assert y._version == 1 and y.grad_fn.name() == "ScatterBackward"
    y.index_add_(0, gv.tensor([0]), gv.ones(1, 4, dtype=gv.float64))
    assert y._version == 2 and y.grad_fn.name() == "IndexAddBackward"
    y.sum().backward()
    expected = np.ones((3, 4))
    np.put_along_axis(expected, PERM_IDX, 0, axis=1)
    np.testing.assert_array_equal(x.grad.numpy(), expected)


@pytest.mark.parametrize("make", [lambda x: x.split(2), lambda x: x.split([1, 3]), lambda x: x.chunk(2),
                                  lambda x: x.unbind(0)], ids=["split", "split sizes", "chunk", "unbind"])
def test_several_views_come_from_one_node_as_in_pytorch(make):
    x = gv.tensor(_r(4, 3), requires_grad=True)
    pieces = make(x * 1)
    nodes = {p.grad_fn for p in pieces}
    assert len(nodes) == 1
    assert [p.output_nr for p in pieces] == list(range(len(pieces)))
    pieces[-1].sum().backward()  # the other outputs get no gradient: zeros in their places
    expected = np.zeros((4, 3))
    expected[4 - pieces[-1].shape[0] if pieces[-1].dim() == 2 else 3:] = 1
    np.testing.assert_array_equal(x.grad.numpy(), expected)


@pytest.mark.oracle
def test_pieces_refuse_to_be_used_after_their_base_was_written_in_place():
    torch = pytest.importorskip("torch")
    messages = []
    for lib in (gv, torch):
        y = lib.tensor(_r(4, 3), requires_grad=True) * 1
        a, b = y.split(2)
        y.mul_(3.0)
        with pytest.raises(RuntimeError) as info:
            a * b
        messages.append(str(info.value))
    assert messages[0] == messages[1]


def test_pieces_of_a_base_without_grad_follow_its_in_place_writes():
    y = gv.tensor(_r(4, 3))
    a, b = y.split(2)
    y.mul_(3.0)
    np.testing.assert_allclose((a * 1).numpy(), _r(4, 3)[:2] * 3)
    assert a._version == b._version == y._version == 1


def test_a_split_in_a_traced_step_is_one_graph_with_no_diagnostic():
    with gv.trace() as tr:
        x = gv.tensor(_r(4, 6), requires_grad=True)
        q, k = x.chunk(2, dim=1)
        rows = gv.stack(q.unbind(0))
        (rows * k).sum().backward()
    doc = tr.to_dict()
    assert {n["graph"] for n in doc["nodes"]} == {0}
    assert tr.diagnostics == []


@pytest.mark.oracle
def test_hooks_retain_grad_and_autograd_grad_on_multi_output_nodes_match_pytorch():
    torch = pytest.importorskip("torch")
    results = []
    for lib in (gv, torch):
        x = lib.tensor(_r(4, 3), requires_grad=True)
        a, b = (x * 1).split(2)
        b.register_hook(lambda g: g * 2)
        grad_a = lib.autograd.grad((a * b).sum(), [a], retain_graph=True)[0].detach()
        a.retain_grad()
        u0, _, u2 = x.unbind(1)
        ((a * b).sum() + (u0 * u2).sum()).backward()
        values, _ = x.sort(0)
        values.retain_grad()
        (values * values).sum().backward()
        results.append([t.numpy().copy() for t in (x.grad, a.grad, grad_a, values.grad)])
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12)
