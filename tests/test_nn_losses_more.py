"""The losses added for issue 8 (BCE with logits, smooth L1, Huber, KL divergence) and cross_entropy's
weight / ignore_index / label_smoothing combinations, against PyTorch and central differences."""

import numpy as np
import pytest

import gradviz as gv
import gradviz.nn as nn
import gradviz.nn.functional as F
from gradviz.autograd import gradcheck

from .nn_oracle_helpers import close, pair

REDUCTIONS = ["mean", "sum", "none"]
# kl_div's reduction='mean' warns (as PyTorch's does); test_kl_div_mean_warns_like_pytorch checks the text.
pytestmark = pytest.mark.filterwarnings("ignore:reduction. 'mean' divides:UserWarning")


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def _var(shape, seed, low=None, high=None):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape) if low is None else rng.uniform(low, high, shape)
    return gv.tensor(a, dtype=gv.float64, requires_grad=True)


def _compare(torch, loss, tloss, grads):
    close(loss, tloss)
    g = np.random.default_rng(7).standard_normal(tuple(tloss.shape))
    loss.backward(gv.tensor(g, dtype=gv.float64))
    tloss.backward(torch.tensor(g))
    for ours, theirs in grads:
        close(ours.grad, theirs.grad)


# ----- central differences ---------------------------------------------------------------------------------
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_pointwise_loss_gradients_reach_input_and_target(reduction):
    x, t = _var((3, 4), 0), _var((3, 4), 1)
    p = _var((3, 4), 2, 0.05, 0.95)
    w = gv.tensor(np.linspace(0.5, 2, 4), dtype=gv.float64)
    assert gradcheck(lambda a, b: F.binary_cross_entropy_with_logits(a, b, w, reduction=reduction, pos_weight=w),
                     (x, p))
    assert gradcheck(lambda a, b: F.smooth_l1_loss(a, b, reduction=reduction, beta=0.7), (x, t))
    assert gradcheck(lambda a, b: F.huber_loss(a, b, reduction=reduction, delta=0.6), (x, t))
    assert gradcheck(lambda a, b: F.kl_div(a, b, reduction=reduction, log_target=True), (x, t))
    assert gradcheck(lambda a, b: F.kl_div(a, b, reduction="batchmean"), (x, p))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_label_smoothing_gradients(reduction):
    x = _var((5, 4), 3)
    t = gv.tensor([0, 3, 1, 1, 2])
    w = gv.tensor([0.5, 2.0, 1.0, 1.5], dtype=gv.float64)
    assert gradcheck(lambda a: F.cross_entropy(a, t, w, ignore_index=1, reduction=reduction, label_smoothing=0.2),
                     (x,))


# ----- PyTorch oracle -----------------------------------------------------------------------------------------
@pytest.mark.oracle
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weight,pos_weight", [(False, False), (True, False), (False, True), (True, True)])
def test_bce_with_logits(torch, reduction, weight, pos_weight):
    w, pw = np.array([0.5, 2.0, 1.0]), np.array([3.0, 0.5, 1.0])
    ours = nn.BCEWithLogitsLoss(weight=gv.tensor(w) if weight else None, reduction=reduction,
                                pos_weight=gv.tensor(pw) if pos_weight else None)
    theirs = torch.nn.BCEWithLogitsLoss(weight=torch.tensor(w) if weight else None, reduction=reduction,
                                        pos_weight=torch.tensor(pw) if pos_weight else None)
    (x, tx), (t, tt) = pair(torch, (4, 3), 0), pair(torch, (4, 3), 1, 0.0, 1.0)
    with torch.no_grad():
        tx *= 10  # big logits: the stable form must not overflow
    x = gv.tensor(tx.detach().numpy(), dtype=gv.float64, requires_grad=True)
    _compare(torch, ours(x, t), theirs(tx, tt), [(x, tx), (t, tt)])


@pytest.mark.oracle
def test_bce_with_logits_is_stable_at_huge_logits(torch):
    x = gv.tensor([800.0, -800.0, 0.0], dtype=gv.float32)
    t = gv.tensor([0.0, 1.0, 1.0])
    got = F.binary_cross_entropy_with_logits(x, t, reduction="none")
    want = torch.nn.functional.binary_cross_entropy_with_logits(torch.tensor(x.numpy()), torch.tensor(t.numpy()),
                                                                reduction="none")
    assert got.dtype == gv.float32
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


@pytest.mark.oracle
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("beta", [1.0, 0.3, 0.0])
def test_smooth_l1(torch, reduction, beta):
    (x, tx), (t, tt) = pair(torch, (5, 3), 0), pair(torch, (5, 3), 1)
    _compare(torch, nn.SmoothL1Loss(reduction=reduction, beta=beta)(x, t),
             torch.nn.SmoothL1Loss(reduction=reduction, beta=beta)(tx, tt), [(x, tx), (t, tt)])


@pytest.mark.oracle
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("delta", [1.0, 0.4, 2.5])
def test_huber(torch, reduction, delta):
    (x, tx), (t, tt) = pair(torch, (5, 3), 0), pair(torch, (5, 3), 1)
    _compare(torch, nn.HuberLoss(reduction=reduction, delta=delta)(x, t),
             torch.nn.HuberLoss(reduction=reduction, delta=delta)(tx, tt), [(x, tx), (t, tt)])


@pytest.mark.oracle
def test_huber_with_weight(torch):
    (x, tx), (t, tt), (w, tw) = pair(torch, (4, 3), 0), pair(torch, (4, 3), 1), pair(torch, (4, 3), 2, 0, 1)
    _compare(torch, F.huber_loss(x, t, delta=0.5, weight=w), torch.nn.functional.huber_loss(tx, tt, delta=0.5,
                                                                                           weight=tw),
             [(x, tx), (t, tt), (w, tw)])


@pytest.mark.oracle
@pytest.mark.parametrize("reduction", REDUCTIONS + ["batchmean"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(torch, reduction, log_target):
    x, tx = pair(torch, (4, 5), 0)
    p = np.random.default_rng(1).dirichlet(np.ones(5), size=4)
    p[0, 2] = 0.0  # a zero probability contributes 0 (xlogy)
    if log_target:
        p = np.log(p + 0.1)
    t, tt = gv.tensor(p, dtype=gv.float64, requires_grad=True), torch.tensor(p, requires_grad=True)
    loss = nn.KLDivLoss(reduction=reduction, log_target=log_target)(x, t)
    tloss = torch.nn.KLDivLoss(reduction=reduction, log_target=log_target)(tx, tt)
    close(loss, tloss)
    g = np.random.default_rng(7).standard_normal(tuple(tloss.shape))
    loss.backward(gv.tensor(g))
    tloss.backward(torch.tensor(g))
    close(x.grad, tx.grad)
    close(t.grad, tt.grad)  # nan where a probability target is 0, as PyTorch's
    if not log_target:
        assert np.isnan(t.grad.numpy()[0, 2]) and np.isfinite(t.grad.numpy()[1]).all()


CE_CASES = [dict(label_smoothing=0.1), dict(label_smoothing=0.3, weight=True),
            dict(label_smoothing=0.2, ignore_index=2), dict(label_smoothing=0.25, ignore_index=0, weight=True),
            dict(weight=True, ignore_index=3), dict(label_smoothing=1.0)]


@pytest.mark.oracle
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("case", CE_CASES, ids=str)
@pytest.mark.parametrize("x_shape", [(7, 4), (2, 4, 3)], ids=str)
def test_cross_entropy_options(torch, x_shape, case, reduction):
    w = np.array([0.2, 1.0, 3.0, 0.7])
    kw = dict(case, reduction=reduction)
    tkw = dict(kw)
    if case.get("weight"):
        kw["weight"], tkw["weight"] = gv.tensor(w), torch.tensor(w)
    else:
        kw.pop("weight", None)
        tkw.pop("weight", None)
    tshape = x_shape[:1] + x_shape[2:]
    target = np.random.default_rng(3).integers(0, 4, tshape)
    x, tx = pair(torch, x_shape, 0)
    _compare(torch, nn.CrossEntropyLoss(**kw)(x, gv.tensor(target)),
             torch.nn.CrossEntropyLoss(**tkw)(tx, torch.tensor(target)), [(x, tx)])


@pytest.mark.oracle
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_probability_targets_with_label_smoothing(torch, reduction):
    x, tx = pair(torch, (5, 3), 0)
    p = np.random.default_rng(8).dirichlet(np.ones(3), size=5)
    t, tt = gv.tensor(p, requires_grad=True), torch.tensor(p, requires_grad=True)
    _compare(torch, F.cross_entropy(x, t, reduction=reduction, label_smoothing=0.15),
             torch.nn.functional.cross_entropy(tx, tt, reduction=reduction, label_smoothing=0.15),
             [(x, tx), (t, tt)])


@pytest.mark.oracle
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_nll_loss_weighted_mean(torch, reduction):
    w = np.array([0.5, 2.0, 1.0])
    x, tx = pair(torch, (6, 3), 0)
    target = np.array([0, 1, 2, 1, 1, 0])
    _compare(torch, F.nll_loss(x, gv.tensor(target), gv.tensor(w), ignore_index=2, reduction=reduction),
             torch.nn.functional.nll_loss(tx, torch.tensor(target), torch.tensor(w), ignore_index=2,
                                          reduction=reduction), [(x, tx)])


@pytest.mark.parametrize("call,error,message", [
    (lambda: F.cross_entropy(gv.randn(2, 3), gv.tensor([0, 1]), label_smoothing=1.5), RuntimeError,
     "label_smoothing must be between 0.0 and 1.0. Got: 1.5"),
    (lambda: F.binary_cross_entropy_with_logits(gv.randn(2, 3), gv.rand(3)), ValueError,
     r"Target size \(torch.Size\(\[3\]\)\) must be the same as input size \(torch.Size\(\[2, 3\]\)\)"),
    (lambda: F.smooth_l1_loss(gv.randn(3), gv.randn(3), beta=-1.0), RuntimeError,
     "smooth_l1_loss does not support negative values for beta."),
    (lambda: nn.HuberLoss(delta="1"), TypeError, "delta must be a float or int, got: <class 'str'>"),
    (lambda: F.kl_div(gv.randn(3), gv.rand(3), reduction="average"), ValueError,
     "average is not a valid value for reduction"),
])
def test_errors_use_pytorch_wording(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_kl_div_mean_warns_like_pytorch():
    with pytest.warns(UserWarning, match="reduction: 'mean' divides the total loss by both the batch size and the "
                                         "support size."):
        F.kl_div(gv.randn(2, 3), gv.rand(2, 3))


# ----- distances, embedding and ranking losses ------------------------------------------------------------------
def _signs(torch, n, seed):
    s = np.where(np.random.default_rng(seed).random(n) < 0.5, -1.0, 1.0)
    return gv.tensor(s), torch.tensor(s)


@pytest.mark.oracle
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("kwargs", [{}, dict(margin=0.5, p=1.0, swap=True), dict(p=3.0, eps=1e-3)], ids=str)
def test_triplet_margin_loss(torch, reduction, kwargs):
    (a, ta), (p, tp), (n, tn) = pair(torch, (5, 4), 0), pair(torch, (5, 4), 1), pair(torch, (5, 4), 2)
    _compare(torch, nn.TripletMarginLoss(reduction=reduction, **kwargs)(a, p, n),
             torch.nn.TripletMarginLoss(reduction=reduction, **kwargs)(ta, tp, tn), [(a, ta), (p, tp), (n, tn)])


@pytest.mark.oracle
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_pair_losses(torch, reduction):
    (x1, t1), (x2, t2) = pair(torch, (6, 3), 0), pair(torch, (6, 3), 1)
    y, ty = _signs(torch, 6, 2)
    _compare(torch, nn.CosineEmbeddingLoss(margin=0.2, reduction=reduction)(x1, x2, y),
             torch.nn.CosineEmbeddingLoss(margin=0.2, reduction=reduction)(t1, t2, ty), [(x1, t1), (x2, t2)])
    (a, ta), (b, tb) = pair(torch, (6,), 3), pair(torch, (6,), 4)
    _compare(torch, nn.MarginRankingLoss(margin=0.3, reduction=reduction)(a, b, y),
             torch.nn.MarginRankingLoss(margin=0.3, reduction=reduction)(ta, tb, ty), [(a, ta), (b, tb)])


@pytest.mark.oracle
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_margin_and_label_losses(torch, reduction):
    (x, tx) = pair(torch, (4, 5), 0)
    y, ty = _signs(torch, (4, 5), 1)
    _compare(torch, nn.HingeEmbeddingLoss(margin=0.7, reduction=reduction)(x, y),
             torch.nn.HingeEmbeddingLoss(margin=0.7, reduction=reduction)(tx, ty), [(x, tx)])
    x.grad = None
    tx.grad = None
    _compare(torch, nn.SoftMarginLoss(reduction=reduction)(x, y),
             torch.nn.SoftMarginLoss(reduction=reduction)(tx, ty), [(x, tx)])
    x.grad = None
    tx.grad = None
    labels = (np.random.default_rng(3).random((4, 5)) < 0.4).astype(np.float64)
    w = np.linspace(0.5, 2.0, 5)
    _compare(torch, nn.MultiLabelSoftMarginLoss(weight=gv.tensor(w), reduction=reduction)(x, gv.tensor(labels)),
             torch.nn.MultiLabelSoftMarginLoss(weight=torch.tensor(w), reduction=reduction)(tx, torch.tensor(labels)),
             [(x, tx)])


@pytest.mark.oracle
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("log_input,full", [(True, False), (False, False), (True, True), (False, True)])
def test_poisson_nll_loss(torch, reduction, log_input, full):
    x, tx = pair(torch, (4, 3), 0, 0.1, 2.0) if not log_input else pair(torch, (4, 3), 0)
    counts = np.random.default_rng(1).poisson(2.0, (4, 3)).astype(np.float64)
    t, tt = gv.tensor(counts, requires_grad=True), torch.tensor(counts, requires_grad=True)
    _compare(torch, nn.PoissonNLLLoss(log_input=log_input, full=full, reduction=reduction)(x, t),
             torch.nn.PoissonNLLLoss(log_input=log_input, full=full, reduction=reduction)(tx, tt),
             [(x, tx)] + ([] if full else [(t, tt)]))


@pytest.mark.oracle
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("var_shape", [(4, 3), (4,), (4, 1)], ids=str)
def test_gaussian_nll_loss(torch, reduction, var_shape):
    (x, tx), (t, tt) = pair(torch, (4, 3), 0), pair(torch, (4, 3), 1)
    v, tv = pair(torch, var_shape, 2, 0.0, 2.0)
    with torch.no_grad():
        tv[0] = 1e-9  # below eps: clamped, its gradient still flows
    v = gv.tensor(tv.detach().numpy(), requires_grad=True)
    _compare(torch, nn.GaussianNLLLoss(full=True, reduction=reduction)(x, t, v),
             torch.nn.GaussianNLLLoss(full=True, reduction=reduction)(tx, tt, tv), [(x, tx), (t, tt), (v, tv)])


@pytest.mark.oracle
def test_cosine_similarity_and_pairwise_distance(torch):
    (a, ta), (b, tb) = pair(torch, (3, 5, 2), 0), pair(torch, (3, 1, 2), 1)
    _compare(torch, nn.CosineSimilarity(dim=1)(a, b), torch.nn.CosineSimilarity(dim=1)(ta, tb), [(a, ta), (b, tb)])
    (c, tc), (d, td) = pair(torch, (4, 3), 2), pair(torch, (4, 3), 3)
    _compare(torch, nn.PairwiseDistance(p=1.0, keepdim=True)(c, d),
             torch.nn.PairwiseDistance(p=1.0, keepdim=True)(tc, td), [(c, tc), (d, td)])


@pytest.mark.parametrize("call,error,message", [
    (lambda: nn.TripletMarginLoss(margin=0), ValueError,
     "TripletMarginLoss: expected margin to be greater than 0, got 0 instead"),
    (lambda: F.gaussian_nll_loss(gv.ones(3), gv.ones(3), gv.tensor([1.0, -1.0, 1.0])), ValueError,
     "var has negative entry/entries"),
    (lambda: F.gaussian_nll_loss(gv.ones(4, 3), gv.ones(4, 3), gv.ones(2)), ValueError, "var is of incorrect size"),
    (lambda: F.margin_ranking_loss(gv.ones(3), gv.ones(3), gv.ones(3, 1)), RuntimeError,
     "margin_ranking_loss : All input tensors should have same dimension but got sizes"),
])
def test_more_loss_errors_use_pytorch_wording(call, error, message):
    with pytest.raises(error, match=message):
        call()
