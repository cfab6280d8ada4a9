"""gradviz.nn against PyTorch itself: same weights in, same outputs and gradients out (float64, 1e-6)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import gradviz as gv  # noqa: E402
import gradviz.nn as nn  # noqa: E402
import gradviz.nn.functional as F  # noqa: E402

pytestmark = pytest.mark.oracle
TF = torch.nn.functional


def _pair(shape, seed, low=None, high=None):
    """The same float64 values as a gradviz and a torch leaf requiring grad."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape) if low is None else rng.uniform(low, high, shape)
    return gv.tensor(a, dtype=gv.float64, requires_grad=True), torch.tensor(a, dtype=torch.float64,
                                                                            requires_grad=True)


def _copy_weights(ours, theirs):
    """Load our module's parameters into the torch module (by state_dict key)."""
    state = {k: torch.from_numpy(np.array(v.numpy(), copy=True)) for k, v in ours.state_dict().items()}
    theirs.load_state_dict(state)


def _close(ours, theirs, tol=1e-6):
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=tol, atol=tol)


def _compare_module(ours, theirs, x_shape, seed=0, seed_grad=1):
    ours.double()
    theirs.double()
    _copy_weights(ours, theirs)
    x, tx = _pair(x_shape, seed)
    out, tout = ours(x), theirs(tx)
    _close(out, tout)
    g = np.random.default_rng(seed_grad).standard_normal(tuple(tout.shape))
    out.backward(gv.tensor(g, dtype=gv.float64))
    tout.backward(torch.tensor(g))
    _close(x.grad, tx.grad)
    for (name, p), (tname, tp) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert name == tname
        _close(p.grad, tp.grad)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("x_shape", [(4, 5), (2, 3, 5), (5,)], ids=str)
def test_linear(bias, x_shape):
    _compare_module(nn.Linear(5, 3, bias=bias), torch.nn.Linear(5, 3, bias=bias), x_shape)


CONV_CONFIGS = [
    dict(in_channels=2, out_channels=3, kernel_size=3),
    dict(in_channels=2, out_channels=4, kernel_size=(3, 2), stride=2, padding=1),
    dict(in_channels=1, out_channels=2, kernel_size=3, stride=(2, 1), padding=(0, 2), dilation=(1, 2), bias=False),
    dict(in_channels=3, out_channels=2, kernel_size=4, padding="same", dilation=2),
    dict(in_channels=2, out_channels=2, kernel_size=2, padding="valid"),
    # Lopsided 'same' padding: the extra row and column go last (torch warns about its own copy here).
    pytest.param(dict(in_channels=2, out_channels=3, kernel_size=(2, 4), padding="same"),
                 marks=pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel")),
]


@pytest.mark.parametrize("config", CONV_CONFIGS, ids=str)
def test_conv2d(config):
    shape = (2, config["in_channels"], 9, 8)
    _compare_module(nn.Conv2d(**config), torch.nn.Conv2d(**config), shape)


def test_conv2d_unbatched_input():
    _compare_module(nn.Conv2d(2, 3, 3, padding=1), torch.nn.Conv2d(2, 3, 3, padding=1), (2, 5, 5))


POOL_CONFIGS = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=(3, 2), stride=1, dilation=(1, 2)),
    dict(kernel_size=3, stride=2, ceil_mode=True),
    dict(kernel_size=2, stride=3, padding=1, ceil_mode=True),
]


@pytest.mark.parametrize("config", POOL_CONFIGS, ids=str)
def test_max_pool2d(config):
    _compare_module(nn.MaxPool2d(**config), torch.nn.MaxPool2d(**config), (2, 3, 9, 8))


def test_max_pool2d_indices_match_pytorch():
    x, tx = _pair((1, 2, 7, 7), 3)
    values, idx = F.max_pool2d(x, 3, stride=2, padding=1, return_indices=True)
    tvalues, tidx = TF.max_pool2d(tx, 3, stride=2, padding=1, return_indices=True)
    _close(values, tvalues)
    assert idx.tolist() == tidx.tolist()
    assert not idx.requires_grad


@pytest.mark.parametrize("module", ["ReLU", "Sigmoid", "Tanh", "Flatten"])
def test_parameterless_modules(module):
    _compare_module(getattr(nn, module)(), getattr(torch.nn, module)(), (3, 2, 4))


@pytest.mark.parametrize("module", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_modules(module, dim):
    _compare_module(getattr(nn, module)(dim=dim), getattr(torch.nn, module)(dim=dim), (3, 4, 2))


def _compare_loss(ours, theirs, x_pair, target_pair):
    (x, tx), (t, tt) = x_pair, target_pair
    loss, tloss = ours(x, t), theirs(tx, tt)
    _close(loss, tloss)
    g = np.random.default_rng(7).standard_normal(tuple(tloss.shape))
    loss.backward(gv.tensor(g, dtype=gv.float64))
    tloss.backward(torch.tensor(g))
    _close(x.grad, tx.grad)
    if isinstance(t, gv.Tensor) and t.requires_grad:
        _close(t.grad, tt.grad)


REDUCTIONS = ["mean", "sum", "none"]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", ["MSELoss", "L1Loss"])
def test_regression_losses(name, reduction):
    _compare_loss(getattr(nn, name)(reduction=reduction), getattr(torch.nn, name)(reduction=reduction),
                  _pair((4, 3), 1), _pair((4, 3), 2))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_bce_loss(reduction, weighted):
    w = np.array([0.5, 2.0, 1.0])
    ours = nn.BCELoss(weight=gv.tensor(w, dtype=gv.float64) if weighted else None, reduction=reduction)
    theirs = torch.nn.BCELoss(weight=torch.tensor(w) if weighted else None, reduction=reduction)
    _compare_loss(ours, theirs, _pair((4, 3), 3, 0.02, 0.98), _pair((4, 3), 4, 0.0, 1.0))


def test_bce_clamps_log_at_minus_100_like_pytorch():
    x = gv.tensor([0.0, 1.0, 0.5], dtype=gv.float64, requires_grad=True)
    tx = torch.tensor([0.0, 1.0, 0.5], dtype=torch.float64, requires_grad=True)
    t = [1.0, 0.0, 1.0]
    loss = F.binary_cross_entropy(x, gv.tensor(t, dtype=gv.float64), reduction="sum")
    tloss = TF.binary_cross_entropy(tx, torch.tensor(t, dtype=torch.float64), reduction="sum")
    _close(loss, tloss)
    loss.backward()
    tloss.backward()
    _close(x.grad, tx.grad)


def _class_target(shape, classes, seed):
    t = np.random.default_rng(seed).integers(0, classes, shape)
    return gv.tensor(t), torch.tensor(t)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("extra", [{}, {"ignore_index": 1}, {"weight": [0.2, 1.0, 3.0, 0.7]}],
                         ids=["plain", "ignore", "weight"])
@pytest.mark.parametrize("x_shape", [(6, 4), (2, 4, 3, 2)], ids=str)
@pytest.mark.parametrize("name", ["CrossEntropyLoss", "NLLLoss"])
def test_class_losses(name, x_shape, extra, reduction):
    ours_kw, theirs_kw = dict(extra, reduction=reduction), dict(extra, reduction=reduction)
    if "weight" in extra:
        ours_kw["weight"] = gv.tensor(extra["weight"], dtype=gv.float64)
        theirs_kw["weight"] = torch.tensor(extra["weight"], dtype=torch.float64)
    target_shape = x_shape[:1] + x_shape[2:]
    # NLLLoss reads any scores, not only log-probabilities: raw ones test it just as well.
    _compare_loss(getattr(nn, name)(**ours_kw), getattr(torch.nn, name)(**theirs_kw), _pair(x_shape, 5),
                  _class_target(target_shape, 4, 6))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_with_probability_targets(reduction, weighted):
    w = [0.5, 1.0, 2.0]
    p = np.random.default_rng(8).dirichlet(np.ones(3), size=5)
    t = gv.tensor(p, dtype=gv.float64, requires_grad=True)
    tt = torch.tensor(p, dtype=torch.float64, requires_grad=True)
    ours = nn.CrossEntropyLoss(weight=gv.tensor(w, dtype=gv.float64) if weighted else None, reduction=reduction)
    theirs = torch.nn.CrossEntropyLoss(weight=torch.tensor(w, dtype=torch.float64) if weighted else None,
                                       reduction=reduction)
    _compare_loss(ours, theirs, _pair((5, 3), 9), (t, tt))


def test_cross_entropy_on_one_sample():
    x, tx = _pair((5,), 10)
    _compare_loss(nn.CrossEntropyLoss(), torch.nn.CrossEntropyLoss(), (x, tx), (gv.tensor(3), torch.tensor(3)))


def test_mse_broadcast_target_warns_and_matches():
    x, tx = _pair((3, 1), 11)
    t, tt = _pair((3,), 12)
    with pytest.warns(UserWarning, match=r"Using a target size \(torch.Size\(\[3\]\)\) that is different"):
        loss = F.mse_loss(x, t)
    with pytest.warns(UserWarning):
        tloss = TF.mse_loss(tx, tt)
    _close(loss, tloss)


def test_small_cnn_training_step_matches():
    def build(m):
        return m.Sequential(m.Conv2d(1, 4, 3, padding=1), m.ReLU(), m.MaxPool2d(2), m.Conv2d(4, 6, 3, stride=2),
                            m.Tanh(), m.Flatten(), m.Linear(6 * 2 * 2, 10), m.LogSoftmax(dim=1))

    gv.manual_seed(0)
    ours, theirs = build(nn).double(), build(torch.nn).double()
    _copy_weights(ours, theirs)
    x, tx = _pair((3, 1, 10, 10), 13)
    t, tt = _class_target((3,), 10, 14)
    loss, tloss = F.nll_loss(ours(x), t), TF.nll_loss(theirs(tx), tt)
    _close(loss, tloss)
    loss.backward()
    tloss.backward()
    for p, tp in zip(ours.parameters(), theirs.parameters()):
        _close(p.grad, tp.grad)
    _close(x.grad, tx.grad)


def test_node_names_follow_pytorch():
    x, tx = _pair((2, 3), 15)
    w, tw = _pair((4, 3), 16)
    b, tb = _pair((4,), 17)
    assert F.linear(x, w, b).grad_fn.name() == type(TF.linear(tx, tw, tb).grad_fn).__name__[:-1]
    assert F.linear(x, w).grad_fn.name() == type(TF.linear(tx, tw).grad_fn).__name__[:-1]
    img, timg = _pair((1, 1, 4, 4), 18)
    k, tk = _pair((1, 1, 2, 2), 19)
    assert F.conv2d(img, k).grad_fn.name() == type(TF.conv2d(timg, tk).grad_fn).__name__[:-1]
    assert F.max_pool2d(img, 2).grad_fn.name() == type(TF.max_pool2d(timg, 2).grad_fn).__name__[:-1]
    assert F.mse_loss(x, x.detach()).grad_fn.name() == "MseLossBackward"
    assert F.dropout(x, 0.5).grad_fn.name() == type(TF.dropout(tx, 0.5).grad_fn).__name__[:-1]


def test_module_reprs_match_pytorch():
    def build(m):
        return m.Sequential(
            m.Conv2d(1, 6, 5, padding=1, bias=False), m.Conv2d(2, 4, (3, 2), stride=2, padding=(1, 0), dilation=2),
            m.Conv2d(1, 1, 3, padding="same"), m.MaxPool2d(3, 1, 1, 2, ceil_mode=True), m.Dropout(0.2),
            m.Flatten(0), m.Softmax(dim=1), m.LogSoftmax(), m.ReLU(inplace=True), m.ReLU(), m.Sigmoid(), m.Tanh(),
            m.Linear(2, 3, bias=False), m.MSELoss(), m.L1Loss(), m.NLLLoss(ignore_index=2), m.CrossEntropyLoss(),
            m.BCELoss(), m.ModuleList([m.Linear(2, 2) for _ in range(3)] + [m.ReLU(), m.Tanh(), m.Tanh()]),
            m.Sequential(), m.ModuleList())

    assert repr(build(nn)) == repr(build(torch.nn))


def test_parameter_repr_matches_pytorch():
    values = [[0.5, -1.25], [2.0625, 3.5]]
    assert repr(nn.Parameter(gv.tensor(values))) == repr(torch.nn.Parameter(torch.tensor(values)))


def test_state_dict_keys_and_load_errors_match_pytorch():
    def build(m):
        return m.Sequential(m.Linear(2, 3), m.ReLU(), m.Sequential(m.Linear(3, 1, bias=False)))

    ours, theirs = build(nn), build(torch.nn)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    bad = {"0.weight": np.zeros((3, 3)), "2.0.weight": np.zeros((1, 3)), "extra": np.zeros(1)}
    with pytest.raises(RuntimeError) as ours_err:
        ours.load_state_dict({k: gv.tensor(v) for k, v in bad.items()})
    with pytest.raises(RuntimeError) as theirs_err:
        theirs.load_state_dict({k: torch.tensor(v, dtype=torch.float32) for k, v in bad.items()})
    assert str(ours_err.value) == str(theirs_err.value)
