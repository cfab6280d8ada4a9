"""Properties of the nn layers over random inputs (hypothesis): packing round-trips, padding inverts cropping,
normalisation layers normalise, resampling keeps constants and sums, and the composed RNN step equals a
numpy reference of PyTorch's equations."""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gradviz as gv
import gradviz.nn as nn
import gradviz.nn.functional as F
from gradviz.nn.utils import rnn as R

SETTINGS = settings(deadline=None, max_examples=30, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(lengths=st.lists(st.integers(1, 6), min_size=1, max_size=5), features=st.integers(1, 3),
       batch_first=st.booleans(), enforce_sorted=st.booleans(), seed=st.integers(0, 2 ** 16))
def test_pack_then_pad_gives_back_the_padded_batch(lengths, features, batch_first, enforce_sorted, seed):
    if enforce_sorted:
        lengths = sorted(lengths, reverse=True)
    rng = np.random.default_rng(seed)
    seqs = [gv.tensor(rng.standard_normal((n, features))) for n in lengths]
    padded = R.pad_sequence(seqs, batch_first=batch_first, padding_value=-7.0)
    packed = R.pack_padded_sequence(padded, lengths, batch_first=batch_first, enforce_sorted=enforce_sorted)
    assert packed.data.shape[0] == sum(lengths)
    assert packed.batch_sizes.tolist() == [sum(n > t for n in lengths) for t in range(max(lengths))]
    back, got_lengths = R.pad_packed_sequence(packed, batch_first=batch_first, padding_value=-7.0)
    assert got_lengths.tolist() == lengths
    np.testing.assert_array_equal(back.numpy(), padded.numpy())
    assert [s.shape[0] for s in R.unpack_sequence(packed)] == lengths


@SETTINGS
@given(shape=st.lists(st.integers(1, 4), min_size=2, max_size=4),
       amounts=st.lists(st.integers(0, 3), min_size=2, max_size=4), seed=st.integers(0, 2 ** 16))
def test_constant_padding_then_negative_padding_is_the_identity(shape, amounts, seed):
    amounts = amounts[:2 * (len(amounts) // 2)][:2 * len(shape)]
    x = gv.tensor(np.random.default_rng(seed).standard_normal(shape))
    grown = F.pad(x, amounts, value=3.0)
    assert sum(grown.numpy().ravel() == 3.0) >= grown.numel() - x.numel()
    np.testing.assert_array_equal(F.pad(grown, [-a for a in amounts]).numpy(), x.numpy())


@SETTINGS
@given(n=st.integers(2, 5), c=st.integers(1, 4), length=st.integers(2, 5), seed=st.integers(0, 2 ** 16))
def test_normalisation_layers_normalise(n, c, length, seed):
    x = gv.tensor(np.random.default_rng(seed).standard_normal((n, c, length)) * 3 + 1)
    out = nn.BatchNorm1d(c, eps=0.0).double()(x).detach().numpy()
    np.testing.assert_allclose(out.mean(axis=(0, 2)), 0, atol=1e-9)
    np.testing.assert_allclose(out.var(axis=(0, 2)), 1, atol=1e-6)
    out = nn.LayerNorm(length, eps=0.0).double()(x).detach().numpy()
    np.testing.assert_allclose(out.mean(axis=-1), 0, atol=1e-9)
    np.testing.assert_allclose(out.var(axis=-1), 1, atol=1e-6)


@SETTINGS
@given(h=st.integers(1, 6), w=st.integers(1, 6), oh=st.integers(1, 9), ow=st.integers(1, 9),
       mode=st.sampled_from(["nearest", "nearest-exact", "bilinear", "area"]), value=st.floats(-5, 5))
def test_resampling_keeps_a_constant_image_constant(h, w, oh, ow, mode, value):
    x = gv.full((1, 2, h, w), value, dtype=gv.float64)
    out = F.interpolate(x, size=(oh, ow), mode=mode)
    assert tuple(out.shape) == (1, 2, oh, ow)
    np.testing.assert_allclose(out.numpy(), value, atol=1e-12)


def _lstm_reference(x, h, c, w_ih, w_hh, b_ih, b_hh):
    """PyTorch's documented LSTM equations, step by step, in numpy."""
    def sigmoid(v):
        return 1 / (1 + np.exp(-v))
    outs = []
    for t in range(x.shape[0]):
        gates = x[t] @ w_ih.T + b_ih + h @ w_hh.T + b_hh
        i, f, g, o = np.split(gates, 4, axis=-1)
        c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
        h = sigmoid(o) * np.tanh(c)
        outs.append(h)
    return np.stack(outs), h, c


@SETTINGS
@given(steps=st.integers(1, 5), batch=st.integers(1, 3), size=st.integers(1, 4), hidden=st.integers(1, 4),
       given_state=st.booleans(), seed=st.integers(0, 2 ** 16))
def test_lstm_equals_the_documented_equations(steps, batch, size, hidden, given_state, seed):
    gv.manual_seed(seed)
    lstm = nn.LSTM(size, hidden).double()
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((steps, batch, size))
    h0 = rng.standard_normal((1, batch, hidden)) if given_state else np.zeros((1, batch, hidden))
    c0 = rng.standard_normal((1, batch, hidden)) if given_state else np.zeros((1, batch, hidden))
    state = (gv.tensor(h0), gv.tensor(c0)) if given_state else None
    out, (h, c) = lstm(gv.tensor(x), state)
    weights = [p.detach().numpy() for p in lstm.parameters()]
    want_out, want_h, want_c = _lstm_reference(x, h0[0], c0[0], *weights)
    np.testing.assert_allclose(out.detach().numpy(), want_out, atol=1e-12)
    np.testing.assert_allclose(h.detach().numpy()[0], want_h, atol=1e-12)
    np.testing.assert_allclose(c.detach().numpy()[0], want_c, atol=1e-12)
