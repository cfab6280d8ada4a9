"""``contiguous()`` copies a tensor whose memory is not row-major (a transpose, an expand, a strided slice), so
the ``x.transpose(1, 2).contiguous().view(...)`` idiom of attention code works as in PyTorch; it used to return
the tensor itself, and the ``view`` after it failed."""

import numpy as np
import pytest

import gradviz


def test_a_transposed_tensor_becomes_row_major_and_viewable():
    x = gradviz.arange(12.0).reshape(3, 4).requires_grad_()
    t = x.t()
    assert not t.is_contiguous()
    c = t.contiguous()
    assert c.is_contiguous() and c.grad_fn.name() == "CloneBackward"
    flat = c.view(-1)
    np.testing.assert_array_equal(flat.detach().numpy(),
                                  np.arange(12.0).reshape(3, 4).T.reshape(-1))
    (flat * gradviz.arange(12.0)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.arange(12.0).reshape(4, 3).T)


def test_a_row_major_tensor_is_returned_as_is():
    x = gradviz.randn(2, 3, requires_grad=True)
    assert x.contiguous() is x
    row = x[1]
    assert row.contiguous() is row
    with pytest.raises(RuntimeError, match="view size is not compatible with input tensor's size and stride"):
        x.t().view(-1)  # without contiguous(), as in PyTorch


def test_contiguous_gradcheck():
    x = gradviz.randn(3, 1, 4, dtype=gradviz.float64, requires_grad=True)
    assert gradviz.autograd.gradcheck(lambda a: a.transpose(0, 2).expand(4, 2, 3).contiguous().view(4, 6), (x,))


@pytest.mark.oracle
def test_attention_head_split_and_merge_match_pytorch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    data = rng.standard_normal((2, 5, 12))
    weights = rng.standard_normal((2, 5, 12))
    results = []
    for lib in (gradviz, torch):
        x = lib.tensor(data, requires_grad=True)
        heads = x.view(2, 5, 3, 4).transpose(1, 2)  # (batch, heads, time, head_dim)
        merged = (heads * 2).transpose(1, 2).contiguous().view(2, 5, 12)
        (merged * lib.tensor(weights)).sum().backward()
        results.append((merged.detach().numpy(), x.grad.numpy(), heads.is_contiguous(),
                        heads.contiguous().is_contiguous()))
    ours, theirs = results
    np.testing.assert_allclose(ours[0], theirs[0])
    np.testing.assert_allclose(ours[1], theirs[1])
    assert ours[2:] == theirs[2:] == (False, True)
