"""``nn.utils``: gradient clipping and parameters <-> vector, against PyTorch and by value."""

import numpy as np
import pytest

import gradviz as gv
import gradviz.nn as nn
from gradviz.nn.utils import (
    clip_grad_norm_,
    clip_grad_value_,
    get_total_norm,
    parameters_to_vector,
    vector_to_parameters,
)


def _params_with_grads(grads):
    params = []
    for g in grads:
        p = nn.Parameter(gv.zeros(*np.shape(g), dtype=gv.float64))
        p.grad = gv.tensor(np.asarray(g, dtype=np.float64))
        params.append(p)
    return params


GRADS = [np.array([[3.0, -4.0], [0.5, 1.0]]), np.array([12.0, -0.25, 2.0])]


@pytest.mark.oracle
@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, float("inf"), "inf"])
@pytest.mark.parametrize("max_norm", [1.0, 100.0])
def test_clip_grad_norm_matches_pytorch(norm_type, max_norm):
    torch = pytest.importorskip("torch")
    ours = _params_with_grads(GRADS)
    theirs = [torch.nn.Parameter(torch.zeros(g.shape, dtype=torch.float64)) for g in GRADS]
    for p, g in zip(theirs, GRADS):
        p.grad = torch.tensor(g)
    total = clip_grad_norm_(ours, max_norm, norm_type=norm_type)
    ttotal = torch.nn.utils.clip_grad_norm_(theirs, max_norm, norm_type=norm_type)
    assert isinstance(total, gv.Tensor) and total.ndim == 0
    np.testing.assert_allclose(total.numpy(), ttotal.numpy(), rtol=1e-12)
    for p, tp in zip(ours, theirs):
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-12)


def test_clip_grad_norm_scales_in_place_and_skips_missing_grads():
    params = _params_with_grads(GRADS) + [nn.Parameter(gv.zeros(2))]
    before = params[0].grad
    version = before._version
    total = clip_grad_norm_(params, 1.0)
    assert params[0].grad is before and before._version == version + 1
    joint = np.sqrt(sum((g ** 2).sum() for g in GRADS))
    assert float(total) == pytest.approx(joint)
    clipped = np.sqrt(sum((p.grad.numpy() ** 2).sum() for p in params[:2]))
    assert clipped == pytest.approx(1.0, rel=1e-5)
    assert params[2].grad is None
    assert float(clip_grad_norm_([nn.Parameter(gv.zeros(2))], 1.0)) == 0.0  # nothing to clip: a zero norm


def test_clip_grad_norm_single_tensor_and_nonfinite_error():
    p = _params_with_grads([np.array([np.inf, 1.0])])[0]
    with pytest.raises(RuntimeError, match="The total norm of order 2.0 for gradients from `parameters` is "
                                           "non-finite, so it cannot be clipped"):
        clip_grad_norm_(p, 1.0, error_if_nonfinite=True)
    q = _params_with_grads([np.array([6.0, 8.0])])[0]
    assert float(clip_grad_norm_(q, 5.0)) == 10.0
    np.testing.assert_allclose(q.grad.numpy(), [3.0, 4.0], rtol=1e-6)
    assert float(get_total_norm([gv.tensor([3.0, 4.0]), gv.tensor([12.0])])) == 13.0


def test_clip_grad_value_clamps_in_place():
    params = _params_with_grads(GRADS)
    assert clip_grad_value_(params, 1.0) is None
    assert params[0].grad.numpy().tolist() == [[1.0, -1.0], [0.5, 1.0]]
    assert params[1].grad.numpy().tolist() == [1.0, -0.25, 1.0]


def test_parameters_to_vector_and_back():
    model = nn.Sequential(nn.Linear(3, 2), nn.ReLU(), nn.Linear(2, 1))
    vec = parameters_to_vector(model.parameters())
    assert tuple(vec.shape) == (3 * 2 + 2 + 2 + 1,)
    assert vec.requires_grad  # differentiable: a flat view for a penalty term
    (vec * vec).sum().backward()
    w = model[0].weight
    np.testing.assert_allclose(w.grad.numpy(), 2 * w.detach().numpy())
    new = gv.arange(11, dtype=gv.float32)
    vector_to_parameters(new, model.parameters())
    assert model[0].weight.detach().numpy().tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert model[2].bias.detach().numpy().tolist() == [10.0]
    with pytest.raises(TypeError, match="expected torch.Tensor, but got: list"):
        vector_to_parameters([1.0], model.parameters())


@pytest.mark.oracle
@pytest.mark.filterwarnings("ignore:`torch.nn.utils.weight_norm` is deprecated")
@pytest.mark.parametrize("dim", [0, 1, None])
def test_weight_norm_matches_pytorch(dim):
    torch = pytest.importorskip("torch")
    from .nn_oracle_helpers import close, compare_module, copy_weights, pair

    ours = nn.utils.weight_norm(nn.Conv2d(2, 3, 2).double(), dim=dim)
    theirs = torch.nn.utils.weight_norm(torch.nn.Conv2d(2, 3, 2).double(), dim=dim)
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["bias", "weight_g", "weight_v"]
    copy_weights(torch, ours, theirs)
    for step in range(2):  # the weight is recomputed from g and v before each forward
        ours.zero_grad()
        theirs.zero_grad()
        compare_module(torch, ours, theirs, [pair(torch, (2, 2, 4, 4), step)])
    nn.utils.remove_weight_norm(ours)
    torch.nn.utils.remove_weight_norm(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    close(ours.weight, theirs.weight)
    with pytest.raises(ValueError, match="weight_norm of 'weight' not found in"):
        nn.utils.remove_weight_norm(ours)


@pytest.mark.oracle
@pytest.mark.parametrize("layer,kwargs,shape", [("Linear", dict(in_features=4, out_features=3), (5, 4)),
                                                ("Conv2d", dict(in_channels=2, out_channels=3, kernel_size=2),
                                                 (2, 2, 4, 4)),
                                                ("ConvTranspose2d", dict(in_channels=3, out_channels=2,
                                                                         kernel_size=2), (1, 3, 3, 3))], ids=str)
@pytest.mark.parametrize("iterations", [1, 3])
def test_spectral_norm_matches_pytorch(layer, kwargs, shape, iterations):
    torch = pytest.importorskip("torch")
    from .nn_oracle_helpers import close, compare_module, copy_weights, pair

    ours = nn.utils.spectral_norm(getattr(nn, layer)(**kwargs).double(), n_power_iterations=iterations)
    theirs = torch.nn.utils.spectral_norm(getattr(torch.nn, layer)(**kwargs).double(), n_power_iterations=iterations)
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["bias", "weight_orig", "weight_u", "weight_v"]
    copy_weights(torch, ours, theirs)
    for step in range(2):  # training: each forward takes power-iteration steps and updates u and v in place
        ours.zero_grad()
        theirs.zero_grad()
        compare_module(torch, ours, theirs, [pair(torch, shape, step)])
        close(ours.weight_u, theirs.weight_u)
        close(ours.weight_v, theirs.weight_v)
    ours.eval()
    theirs.eval()
    compare_module(torch, ours, theirs, [pair(torch, shape, 5)])
    nn.utils.remove_spectral_norm(ours)
    torch.nn.utils.remove_spectral_norm(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    close(ours.weight, theirs.weight)
    with pytest.raises(ValueError, match="spectral_norm of 'weight' not found in"):
        nn.utils.remove_spectral_norm(ours)
