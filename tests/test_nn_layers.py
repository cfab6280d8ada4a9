"""Layer behaviour beyond gradients: dropout modes, freezing, dtypes kept, version checks, PyTorch's errors."""

import warnings

import numpy as np
import pytest

import gradviz as gv
import gradviz.nn as nn
import gradviz.nn.functional as F
from gradviz.errors import DtypeError, ShapeError, StaleVersionError, UnsupportedError


# ----- dropout ---------------------------------------------------------------------------------------------
def test_dropout_is_reproducible_scaled_and_identity_in_eval():
    drop = nn.Dropout(0.3)
    x = gv.ones(200, 50)
    gv.manual_seed(7)
    a = drop(x).numpy()
    gv.manual_seed(7)
    b = drop(x).numpy()
    np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(np.unique(a), [0.0, 1 / 0.7], rtol=1e-6)
    assert abs((a == 0).mean() - 0.3) < 0.02  # 10,000 draws: 0.3 ± 4.6 standard deviations
    drop.eval()
    assert drop(x) is x
    assert F.dropout(x, 0.5, training=False) is x


def test_dropout_edge_probabilities_and_inplace():
    x = gv.ones(3, 4)
    assert not F.dropout(x, 1.0).numpy().any()
    np.testing.assert_array_equal(F.dropout(x, 0.0).numpy(), x.numpy())
    y = gv.ones(100)
    version = y.version
    gv.manual_seed(1)
    out = F.dropout(y, 0.5, inplace=True)
    assert out is y and y.version == version + 1 and (y.numpy() == 0).any()
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1, but got 1.5"):
        nn.Dropout(1.5)


# ----- freezing and memory ----------------------------------------------------------------------------------
def test_frozen_layer_on_plain_input_records_nothing():
    lin = nn.Linear(4, 3).requires_grad_(False)
    conv = nn.Conv2d(1, 2, 3).requires_grad_(False)
    assert lin(gv.ones(2, 4)).grad_fn is None
    assert conv(gv.ones(1, 1, 5, 5)).grad_fn is None


def test_linear_saves_only_what_backward_needs():
    lin = nn.Linear(4, 3)
    x = gv.ones(2, 4)
    node = lin(x).grad_fn  # input needs no grad: the weight is not needed, only x (for the weight's grad)
    assert [s.kind for s in node.saved if s.data is not None] == ["input"]
    assert [s.index for s in node.saved if s.data is not None] == [0]
    lin.requires_grad_(False)
    node = lin(gv.ones(2, 4, requires_grad=True)).grad_fn  # frozen layer: keep the weight, not x
    assert [s.index for s in node.saved if s.data is not None] == [1]
    assert node.name() == "AddmmBackward"


def test_cross_entropy_saves_one_softmax_sized_buffer():
    logits = gv.randn(8, 5, requires_grad=True)
    node = F.cross_entropy(logits, gv.randint(0, 5, (8,))).grad_fn
    assert node.name() == "CrossEntropyLossBackward"
    buffers = [s for s in node.saved if s.kind == "buffer" and s.data is not None and s.data.shape == (8, 5)]
    assert len(buffers) == 1


# ----- dtypes -------------------------------------------------------------------------------------------------
def test_float32_training_stays_float32_everywhere():
    model = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                          nn.Linear(8, 4), nn.Dropout(0.1), nn.Sigmoid())
    x = gv.randn(3, 1, 4, 4)
    out = model(x)
    losses = [nn.CrossEntropyLoss()(out, gv.tensor([0, 1, 3])), nn.MSELoss()(out, gv.zeros(3, 4)),
              nn.L1Loss()(out, gv.zeros(3, 4)), nn.BCELoss()(out, gv.ones(3, 4)),
              nn.NLLLoss()(F.log_softmax(out, dim=1), gv.tensor([0, 1, 3])),
              F.cross_entropy(out, F.softmax(out, dim=1).detach())]
    for loss in losses:
        assert loss.dtype == gv.float32
        model.zero_grad()
        loss.backward(retain_graph=True)
        assert all(p.grad.dtype == gv.float32 for p in model.parameters())


def test_mixed_dtypes_are_refused_like_pytorch():
    with pytest.raises(DtypeError, match="expected m1 and m2 to have the same dtype, but got: double != float"):
        nn.Linear(2, 2)(gv.ones(1, 2, dtype=gv.float64))
    with pytest.raises(DtypeError, match="expected scalar type Double but found Float"):
        nn.Conv2d(1, 1, 1)(gv.ones(1, 1, 2, 2, dtype=gv.float64))


# ----- versions ------------------------------------------------------------------------------------------------
def test_updating_a_weight_between_forward_and_backward_is_caught():
    lin = nn.Linear(2, 2)
    out = lin(gv.ones(1, 2, requires_grad=True)).sum()
    with gv.no_grad():
        lin.weight.mul_(2)
    with pytest.raises(StaleVersionError, match=r"is at version 2; expected version 1 instead"):
        out.backward()


# ----- errors with PyTorch's wording -------------------------------------------------------------------------
@pytest.mark.parametrize("call, error, message", [
    (lambda: F.linear(gv.ones(3, 2), gv.ones(4, 3)), ShapeError,
     r"mat1 and mat2 shapes cannot be multiplied \(3x2 and 3x4\)"),
    (lambda: F.conv2d(gv.ones(1, 2, 5, 5), gv.ones(4, 3, 3, 3)), ShapeError,
     r"Given groups=1, weight of size \[4, 3, 3, 3\], expected input\[1, 2, 5, 5\] to have 3 channels, "
     r"but got 2 channels instead"),
    (lambda: F.conv2d(gv.ones(1, 3, 2, 2), gv.ones(4, 3, 3, 3)), ShapeError,
     r"Calculated padded input size per channel: \(2 x 2\). Kernel size: \(3 x 3\). Kernel size can't be "
     r"greater than actual input size"),
    (lambda: F.conv2d(gv.ones(3, 2), gv.ones(4, 3, 3, 3)), ShapeError,
     r"Expected 3D \(unbatched\) or 4D \(batched\) input to conv2d, but got input of size: \[3, 2\]"),
    (lambda: nn.Conv2d(2, 4, 3, groups=2), UnsupportedError, "groups=1 only"),
    (lambda: F.conv2d(gv.ones(1, 2, 5, 5), gv.ones(4, 1, 3, 3), groups=2), UnsupportedError, "groups=1 only"),
    (lambda: nn.Conv2d(2, 4, 3, padding="same", stride=2), ValueError,
     "padding='same' is not supported for strided convolutions"),
    (lambda: F.max_pool2d(gv.ones(1, 1, 5, 5), 2, padding=2), RuntimeError,
     "pad should be at most half of effective kernel size, but got pad=2, kernel_size=2 and dilation=1"),
    (lambda: F.max_pool2d(gv.ones(5, 5), 2), ShapeError, r"non-empty 3D or 4D \(batch mode\) tensor expected"),
    (lambda: F.max_pool2d(gv.ones(1, 1, 1, 1), 2), ShapeError,
     r"Given input size: \(1x1x1\). Calculated output size: \(1x0x0\). Output size is too small"),
    (lambda: F.nll_loss(gv.ones(3, 3), gv.tensor([0, 1, 5])), IndexError, "Target 5 is out of bounds."),
    (lambda: F.cross_entropy(gv.ones(3, 3), gv.tensor([0, 1])), ValueError,
     r"Expected input batch_size \(3\) to match target batch_size \(2\)."),
    (lambda: F.cross_entropy(gv.ones(3, 3), gv.tensor([0.0, 1.0, 1.0])), RuntimeError,
     "expected target dtype to be Long or Byte, but got Float"),
    (lambda: F.binary_cross_entropy(gv.tensor([1.5]), gv.tensor([1.0])), RuntimeError,
     "all elements of input should be between 0 and 1"),
    (lambda: F.binary_cross_entropy(gv.tensor([0.5]), gv.tensor([[1.0]])), ValueError,
     r"Using a target size \(torch.Size\(\[1, 1\]\)\) that is different to the input size "
     r"\(torch.Size\(\[1\]\)\) is deprecated"),
    (lambda: F.mse_loss(gv.ones(2), gv.ones(2), reduction="avg"), ValueError,
     "avg is not a valid value for reduction"),
])
def test_errors_use_pytorch_wording(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_implicit_softmax_dim_warns_and_picks_pytorchs_dim():
    x = gv.randn(2, 3)
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmax has been deprecated"):
        out = F.softmax(x)
    np.testing.assert_allclose(out.numpy().sum(axis=1), 1, rtol=1e-6)


def test_legacy_size_average_and_reduce_map_to_reduction():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert nn.MSELoss(size_average=False).reduction == "sum"
        assert nn.L1Loss(reduce=False).reduction == "none"


def test_nll_mean_with_every_target_ignored_is_nan_like_pytorch():
    loss = F.nll_loss(gv.randn(2, 3), gv.tensor([1, 1]), ignore_index=1)
    assert np.isnan(loss.item())
