"""RNN, LSTM, GRU and their cells against PyTorch (weights copied through state_dict, float64, 1e-6) and
against central differences; plus PyTorch's parameter names, shapes and error wording."""

import numpy as np
import pytest

import gradviz as gv
import gradviz.nn as nn
from gradviz.autograd import gradcheck

from .nn_oracle_helpers import backward_both, close, compare_module, copy_weights, pair


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def _same(torch, ours, theirs):
    ours.double()
    theirs.double()
    copy_weights(torch, ours, theirs)
    return ours, theirs


RECURRENT = [
    ("LSTM", dict(num_layers=2, bidirectional=True, batch_first=True)),
    ("LSTM", dict()),
    ("LSTM", dict(num_layers=2, bias=False)),
    ("LSTM", dict(num_layers=2, bidirectional=True, proj_size=2)),
    ("LSTM", dict(proj_size=3, batch_first=True, bias=False)),
    ("GRU", dict(num_layers=2, bidirectional=True)),
    ("GRU", dict(batch_first=True, bias=False)),
    ("RNN", dict(num_layers=2)),
    ("RNN", dict(nonlinearity="relu", bidirectional=True, batch_first=True)),
]


@pytest.mark.oracle
@pytest.mark.parametrize("initial", [False, True], ids=["zero-state", "given-state"])
@pytest.mark.parametrize("name,kwargs", RECURRENT, ids=[f"{n}-{k}" for n, k in RECURRENT])
def test_recurrent_layers_match_pytorch(torch, name, kwargs, initial):
    ours, theirs = _same(torch, getattr(nn, name)(3, 4, **kwargs), getattr(torch.nn, name)(3, 4, **kwargs))
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for (n, p), (tn, tp) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert n == tn and tuple(p.shape) == tuple(tp.shape)
    batch, steps = 2, 5
    x = pair(torch, (batch, steps, 3) if kwargs.get("batch_first") else (steps, batch, 3), 0)
    inputs = [x]
    if initial:
        layers = kwargs.get("num_layers", 1) * (2 if kwargs.get("bidirectional") else 1)
        h = pair(torch, (layers, batch, kwargs.get("proj_size", 4)), 1)
        if name == "LSTM":
            c = pair(torch, (layers, batch, 4), 2)
            outs = compare_module(torch, _Wrap(ours), _Wrap(theirs), [x, h, c])
        else:
            outs = compare_module(torch, ours, theirs, [x, h])
    else:
        outs = compare_module(torch, ours, theirs, inputs)
    assert len(outs[0]) == (3 if name == "LSTM" else 2)  # output, h_n (, c_n)
    assert repr(ours) == repr(theirs)


class _Wrap:
    """Call an LSTM with (x, h0, c0) as three positional inputs (the helper passes inputs positionally)."""

    def __init__(self, module):
        self.module = module

    def __call__(self, x, h, c):
        return self.module(x, (h, c))

    def named_parameters(self):
        return self.module.named_parameters()


@pytest.mark.oracle
@pytest.mark.parametrize("name", ["LSTM", "GRU", "RNN"])
def test_unbatched_input(torch, name):
    ours, theirs = _same(torch, getattr(nn, name)(3, 2, num_layers=2), getattr(torch.nn, name)(3, 2, num_layers=2))
    outs, _ = compare_module(torch, ours, theirs, [pair(torch, (4, 3), 0)])
    assert tuple(outs[0].shape) == (4, 2) and tuple(outs[1].shape) == (2, 2)


@pytest.mark.oracle
def test_dropout_between_layers_only_in_training(torch):
    gv.manual_seed(0)
    ours = nn.LSTM(3, 4, num_layers=2, dropout=0.5)
    x = gv.randn(5, 2, 3)
    a, b = ours(x)[0], ours(x)[0]
    assert not np.allclose(a.detach().numpy(), b.detach().numpy())  # the mask is redrawn each call
    ours.eval()
    theirs = torch.nn.LSTM(3, 4, num_layers=2, dropout=0.5).eval()
    ours.double()
    theirs.double()
    copy_weights(torch, ours, theirs)
    compare_module(torch, ours, theirs, [pair(torch, (5, 2, 3), 1)])
    with pytest.warns(UserWarning, match="dropout option adds dropout after all but last recurrent layer"):
        nn.GRU(3, 4, dropout=0.2)


CELLS = [("LSTMCell", {}), ("GRUCell", {}), ("RNNCell", {}), ("RNNCell", {"nonlinearity": "relu"}),
         ("GRUCell", {"bias": False}), ("LSTMCell", {"bias": False})]


@pytest.mark.oracle
@pytest.mark.parametrize("name,kwargs", CELLS, ids=[f"{n}-{k}" for n, k in CELLS])
@pytest.mark.parametrize("batched", [True, False])
def test_cells_match_pytorch(torch, name, kwargs, batched):
    ours, theirs = _same(torch, getattr(nn, name)(3, 4, **kwargs), getattr(torch.nn, name)(3, 4, **kwargs))
    assert list(ours.state_dict()) == list(theirs.state_dict())
    lead = (2,) if batched else ()
    x = pair(torch, lead + (3,), 0)
    compare_module(torch, ours, theirs, [x])  # zero initial state
    ours.zero_grad()
    theirs.zero_grad()
    h = pair(torch, lead + (4,), 1)
    if name == "LSTMCell":
        c = pair(torch, lead + (4,), 2)
        compare_module(torch, _Wrap(ours), _Wrap(theirs), [x, h, c])
    else:
        compare_module(torch, ours, theirs, [x, h])
    assert repr(ours) == repr(theirs)


@pytest.mark.parametrize("name", ["LSTM", "GRU", "RNN"])
def test_recurrent_gradients_against_central_differences(name):
    gv.manual_seed(0)
    layer = getattr(nn, name)(2, 3, num_layers=2, bidirectional=True).double()
    x = gv.randn(4, 2, 2, dtype=gv.float64, requires_grad=True)
    w = layer.weight_hh_l0_reverse

    def run(x, w):
        return layer(x)[0]

    assert gradcheck(run, (x, w))


def test_lstm_cell_gradients_against_central_differences():
    gv.manual_seed(1)
    cell = nn.LSTMCell(2, 3).double()
    x, h, c = (gv.randn(2, n, dtype=gv.float64, requires_grad=True) for n in (2, 3, 3))
    assert gradcheck(lambda x, h, c: cell(x, (h, c)), (x, h, c))


def test_parameter_names_shapes_and_init_range():
    lstm = nn.LSTM(5, 7, num_layers=2, bidirectional=True)
    shapes = {n: tuple(p.shape) for n, p in lstm.named_parameters()}
    assert shapes["weight_ih_l0"] == (28, 5) and shapes["weight_hh_l0_reverse"] == (28, 7)
    assert shapes["weight_ih_l1"] == (28, 14) and shapes["bias_hh_l1_reverse"] == (28,)
    bound = 1 / np.sqrt(7)
    values = np.concatenate([p.detach().numpy().ravel() for p in lstm.parameters()])
    assert values.min() >= -bound and values.max() <= bound and values.std() > bound / 3
    assert len(lstm.all_weights) == 4 and len(lstm.all_weights[0]) == 4
    assert tuple(nn.GRUCell(5, 7).weight_ih.shape) == (21, 5)


@pytest.mark.parametrize("call,error,message", [
    (lambda: nn.LSTM(3, 4)(gv.randn(5, 2, 2)), RuntimeError,
     "input.size\\(-1\\) must be equal to input_size. Expected 3, got 2"),
    (lambda: nn.LSTM(3, 4, 2)(gv.randn(5, 2, 3), (gv.zeros(1, 2, 4), gv.zeros(2, 2, 4))), RuntimeError,
     r"Expected hidden\[0\] size \(2, 2, 4\), got \[1, 2, 4\]"),
    (lambda: nn.GRU(3, 4)(gv.randn(5, 2, 3), gv.zeros(2, 2, 4)), RuntimeError,
     r"Expected hidden size \(1, 2, 4\), got \[2, 2, 4\]"),
    (lambda: nn.LSTM(3, 4)(gv.randn(5, 2, 3, 1)), ValueError, "LSTM: Expected input to be 2D or 3D, got 4D instead"),
    (lambda: nn.LSTM(3, 4)(gv.randn(5, 2, 3, dtype=gv.float64)), ValueError,
     r"RNN input dtype \(torch.float64\) does not match weight dtype \(torch.float32\)"),
    (lambda: nn.RNN(3, 4, nonlinearity="gelu"), ValueError,
     "Unknown nonlinearity 'gelu'. Select from 'tanh' or 'relu'."),
    (lambda: nn.GRU(3, 4, proj_size=2), ValueError, "proj_size argument is only supported for LSTM, not RNN or GRU"),
    (lambda: nn.LSTMCell(3, 4)(gv.randn(2, 5)), RuntimeError, "input has inconsistent input_size: got 5 expected 3"),
    (lambda: nn.GRUCell(3, 4)(gv.randn(2, 3), gv.randn(2, 2)), RuntimeError,
     "hidden0 has inconsistent hidden_size: got 2, expected 4"),
    (lambda: nn.LSTMCell(3, 4)(gv.randn(2, 3), (gv.randn(3, 4), gv.randn(3, 4))), RuntimeError,
     "Input batch size 2 doesn't match hidden0 batch size 3"),
    (lambda: nn.LSTM(3, 4, dropout=1.5), ValueError, "dropout should be a number in range \\[0, 1\\]"),
])
def test_errors_use_pytorch_wording(call, error, message):
    with pytest.raises(error, match=message):
        call()


@pytest.mark.oracle
@pytest.mark.parametrize("name", ["LSTM", "GRU", "RNN"])
def test_one_step_sequence_gives_recurrent_weights_a_zero_gradient(torch, name):
    # From the zero initial state W_hh contributes nothing; PyTorch still gives it a (zero) gradient, not None.
    ours, theirs = _same(torch, getattr(nn, name)(3, 2), getattr(torch.nn, name)(3, 2))
    compare_module(torch, ours, theirs, [pair(torch, (1, 2, 3), 0)])
    assert ours.weight_hh_l0.grad is not None and not ours.weight_hh_l0.grad.numpy().any()


# ----- variable-length sequences (torch.nn.utils.rnn) ---------------------------------------------------------
def _sequences(torch, lengths, features=3, seed=0):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal((n, features)) for n in lengths]
    ours = [gv.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    return ours, theirs


@pytest.mark.oracle
@pytest.mark.parametrize("name,kwargs", [("LSTM", dict(num_layers=2, bidirectional=True)),
                                         ("GRU", dict(bidirectional=True, batch_first=True)),
                                         ("RNN", dict(num_layers=2)), ("LSTM", dict(proj_size=2))], ids=str)
@pytest.mark.parametrize("sorted_input", [True, False])
@pytest.mark.parametrize("initial", [False, True])
def test_packed_sequences_match_pytorch(torch, name, kwargs, sorted_input, initial):
    from gradviz.nn.utils import rnn as R

    TR = torch.nn.utils.rnn
    ours, theirs = _same(torch, getattr(nn, name)(3, 4, **kwargs), getattr(torch.nn, name)(3, 4, **kwargs))
    lengths = [5, 3, 3, 1] if sorted_input else [2, 5, 1, 3]
    seqs, tseqs = _sequences(torch, lengths)
    bf = kwargs.get("batch_first", False)
    padded, tpadded = R.pad_sequence(seqs, batch_first=bf), TR.pad_sequence(tseqs, batch_first=bf)
    packed = R.pack_padded_sequence(padded, gv.tensor(lengths), batch_first=bf, enforce_sorted=sorted_input)
    tpacked = TR.pack_padded_sequence(tpadded, torch.tensor(lengths), batch_first=bf, enforce_sorted=sorted_input)
    args, targs = [packed], [tpacked]
    if initial:
        layers = kwargs.get("num_layers", 1) * (2 if kwargs.get("bidirectional") else 1)
        h, th = pair(torch, (layers, 4, kwargs.get("proj_size", 4)), 1)
        if name == "LSTM":
            c, tc = pair(torch, (layers, 4, 4), 2)
            args.append((h, c))
            targs.append((th, tc))
        else:
            args.append(h)
            targs.append(th)
    out, hidden = ours(*args)
    tout, thidden = theirs(*targs)
    assert out.batch_sizes.tolist() == tout.batch_sizes.tolist()
    unpacked, lens = R.pad_packed_sequence(out, batch_first=True)
    tunpacked, tlens = TR.pad_packed_sequence(tout, batch_first=True)
    assert lens.tolist() == tlens.tolist() == lengths
    outs = [unpacked] + list(hidden if isinstance(hidden, tuple) else (hidden,))
    touts = [tunpacked] + list(thidden if isinstance(thidden, tuple) else (thidden,))
    for o, to in zip(outs, touts):
        close(o, to)
    backward_both(torch, outs, touts)
    for s, ts in zip(seqs, tseqs):
        close(s.grad, ts.grad)
    tparams = dict(theirs.named_parameters())
    for pname, p in ours.named_parameters():
        close(p.grad, tparams[pname].grad)
    if initial:
        close(args[1][0].grad if name == "LSTM" else args[1].grad,
              targs[1][0].grad if name == "LSTM" else targs[1].grad)


def test_pack_padded_sequence_errors_use_pytorch_wording():
    from gradviz.nn.utils import rnn as R

    with pytest.raises(RuntimeError, match="`lengths` array must be sorted in decreasing order when "
                                           "`enforce_sorted` is True"):
        R.pack_padded_sequence(gv.zeros(3, 2, 1), [1, 3])
    with pytest.raises(RuntimeError, match="Length of all samples has to be greater than 0"):
        R.pack_padded_sequence(gv.zeros(3, 2, 1), [3, 0])
    packed = R.pack_sequence([gv.ones(3, 1), gv.ones(2, 1)])
    with pytest.raises(ValueError, match="Expected total_length to be at least the length of the longest sequence"):
        R.pad_packed_sequence(packed, total_length=2)
    padded, lengths = R.pad_packed_sequence(packed, total_length=4, padding_value=-1.0)
    assert padded.shape == (4, 2, 1) and padded.numpy()[:, 1, 0].tolist() == [1.0, 1.0, -1.0, -1.0]
    assert [s.shape[0] for s in R.unpack_sequence(packed)] == [3, 2]


def test_fused_cell_ops_against_central_differences():
    from gradviz.ops.nn_recurrent import GruCell, LstmCell

    rng = np.random.default_rng(3)

    def var(*shape):
        return gv.tensor(rng.standard_normal(shape), requires_grad=True)

    gates, c = var(2, 12), var(2, 3)
    assert gradcheck(lambda g, c: LstmCell.apply(g, c), (gates, c))
    assert gradcheck(lambda g: LstmCell.apply(g, None), (gates,))
    xp, gh, h = var(2, 9), var(2, 9), var(2, 3)
    assert gradcheck(lambda x, g, h: GruCell.apply(x, g, h), (xp, gh, h))
    assert gradcheck(lambda x, g: GruCell.apply(x, g, None), (xp, gh))
    assert gradcheck(lambda x: GruCell.apply(x, None, None), (xp,))
