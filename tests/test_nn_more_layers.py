"""The layers added for issue 8 against PyTorch (same weights via state_dict, float64, 1e-6) and against
central differences: activations, normalisation, embedding, pooling, channel dropout, containers, attention
and the transformer encoder."""

import warnings

import numpy as np
import pytest

import gradviz as gv
import gradviz.nn as nn
import gradviz.nn.functional as F
from gradviz.autograd import gradcheck

from .nn_oracle_helpers import close, compare_module, copy_weights, pair


def _var(shape, seed, low=None, high=None):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape) if low is None else rng.uniform(low, high, shape)
    return gv.tensor(a, dtype=gv.float64, requires_grad=True)


# ----- gradients against central differences ----------------------------------------------------------------
ACTIVATIONS = [
    ("gelu", lambda x: F.gelu(x)),
    ("gelu-tanh", lambda x: F.gelu(x, approximate="tanh")),
    ("silu", F.silu),
    ("leaky_relu", lambda x: F.leaky_relu(x, 0.2)),
    ("elu", lambda x: F.elu(x, 1.5)),
    ("softplus", lambda x: F.softplus(x, beta=2.0, threshold=1.5)),
    ("hardtanh", lambda x: F.hardtanh(x, -0.7, 0.4)),
]


@pytest.mark.parametrize("name,fn", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_activation_gradients(name, fn):
    # Values kept away from the kinks (0, the hardtanh bounds, softplus's threshold) where differences lie.
    x = gv.tensor([[-2.3, -0.9, -0.31, 0.13], [0.52, 0.95, 1.7, 3.1]], dtype=gv.float64, requires_grad=True)
    assert gradcheck(fn, (x,))


NORMS = [
    ("batch_norm-train-2d", lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), (5, 3)),
    ("batch_norm-train-4d", lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), (2, 3, 2, 2)),
    ("batch_norm-eval", lambda x, w, b: F.batch_norm(x, gv.tensor([0.1, -0.2, 0.3], dtype=gv.float64),
                                                     gv.tensor([0.5, 1.5, 2.0], dtype=gv.float64), w, b), (4, 3, 2)),
    ("group_norm", lambda x, w, b: F.group_norm(x, 3, w, b), (2, 3, 2, 2)),
]


@pytest.mark.parametrize("name,fn,shape", NORMS, ids=[n[0] for n in NORMS])
def test_norm_gradients(name, fn, shape):
    assert gradcheck(fn, (_var(shape, 0), _var((3,), 1), _var((3,), 2)))


def test_layer_norm_gradients_over_two_dims():
    assert gradcheck(lambda x, w, b: F.layer_norm(x, (3, 4), w, b), (_var((2, 3, 4), 3), _var((3, 4), 4),
                                                                      _var((3, 4), 5)))
    assert gradcheck(lambda x: F.layer_norm(x, 4), (_var((3, 4), 6),))


def test_pooling_gradients():
    x = _var((2, 2, 5, 6), 7)
    assert gradcheck(lambda a: F.avg_pool2d(a, 3, 2, 1, ceil_mode=True, count_include_pad=False), (x,))
    assert gradcheck(lambda a: F.avg_pool2d(a, (2, 3), 1), (x,))
    assert gradcheck(lambda a: F.adaptive_avg_pool2d(a, (3, 4)), (x,))


def test_embedding_gradient_sums_repeats_and_skips_padding_row():
    w = _var((5, 3), 8)
    idx = gv.tensor([[0, 2, 2], [4, 1, 2]])
    assert gradcheck(lambda w: F.embedding(idx, w), (w,))
    # With padding_idx the padding row's gradient is 0 by design (not the derivative): checked by value.
    F.embedding(idx, w, padding_idx=1).sum().backward()
    assert w.grad.numpy()[:, 0].tolist() == [1.0, 0.0, 3.0, 0.0, 1.0]


def test_attention_gradients():
    q, k, v = _var((2, 3, 4), 9), _var((2, 5, 4), 10), _var((2, 5, 4), 11)
    mask = gv.tensor(np.array([[True, True, False, True, True]] * 3))
    assert gradcheck(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, attn_mask=mask), (q, k, v))


# ----- PyTorch oracle ---------------------------------------------------------------------------------------
@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def _same(torch, ours, theirs):
    ours.double()
    theirs.double()
    copy_weights(torch, ours, theirs)
    return ours, theirs


ACTIVATION_MODULES = [("GELU", {}), ("GELU", {"approximate": "tanh"}), ("SiLU", {}), ("LeakyReLU", {}),
                      ("LeakyReLU", {"negative_slope": 0.3}), ("ELU", {"alpha": 0.7}), ("Softplus", {}),
                      ("Softplus", {"beta": 3.0, "threshold": 2.0}), ("Hardtanh", {}),
                      ("Hardtanh", {"min_val": -0.5, "max_val": 2.0}), ("ReLU6", {}), ("Identity", {})]


@pytest.mark.oracle
@pytest.mark.parametrize("name,kwargs", ACTIVATION_MODULES, ids=[f"{a}-{b}" for a, b in ACTIVATION_MODULES])
def test_activation_modules(torch, name, kwargs):
    ours, theirs = getattr(nn, name)(**kwargs), getattr(torch.nn, name)(**kwargs)
    x = pair(torch, (4, 5, 3), 0, -4, 4)
    compare_module(torch, ours, theirs, [x])
    assert repr(ours) == repr(theirs)


@pytest.mark.oracle
def test_gelu_float32_and_extreme_inputs(torch):
    a = np.array([-40.0, -6.0, -2.6, -0.5, 0.0, 1e-8, 2.4, 7.0, 40.0])
    for dtype, tdtype, tol in ((gv.float32, torch.float32, 1e-6), (gv.float64, torch.float64, 1e-14)):
        got = F.gelu(gv.tensor(a, dtype=dtype))
        assert got.dtype == dtype
        np.testing.assert_allclose(got.numpy(), torch.nn.functional.gelu(torch.tensor(a, dtype=tdtype)).numpy(),
                                   rtol=tol, atol=tol)


@pytest.mark.oracle
def test_inplace_activations_match(torch):
    for fn in ("leaky_relu", "elu", "hardtanh", "silu"):
        x, tx = pair(torch, (3, 4), 1)
        a, ta = x * 1.0, tx * 1.0
        out, tout = getattr(F, fn)(a, inplace=True), getattr(torch.nn.functional, fn)(ta, inplace=True)
        assert out is a
        close(a, ta)
        out.sum().backward()
        tout.sum().backward()
        close(x.grad, tx.grad)


@pytest.mark.oracle
@pytest.mark.parametrize("cls,shape", [("BatchNorm1d", (6, 3)), ("BatchNorm1d", (4, 3, 5)),
                                       ("BatchNorm2d", (3, 3, 4, 2))], ids=str)
@pytest.mark.parametrize("momentum", [0.1, None, 0.5])
def test_batch_norm_train_then_eval(torch, cls, shape, momentum):
    ours, theirs = _same(torch, getattr(nn, cls)(3, momentum=momentum), getattr(torch.nn, cls)(3, momentum=momentum))
    with torch.no_grad():  # non-trivial affine parameters
        theirs.weight.uniform_(0.5, 1.5)
        theirs.bias.uniform_(-0.5, 0.5)
    ours.load_state_dict({k: gv.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    for step in range(3):
        compare_module(torch, ours, theirs, [pair(torch, shape, step)])
        for name, buf in theirs.named_buffers():
            close(getattr(ours, name), buf)
    assert int(ours.num_batches_tracked) == 3
    ours.eval()
    theirs.eval()
    ours.zero_grad()
    theirs.zero_grad()
    compare_module(torch, ours, theirs, [pair(torch, shape, 9)])
    for name, buf in theirs.named_buffers():
        close(getattr(ours, name), buf)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert repr(ours) == repr(theirs)


@pytest.mark.oracle
@pytest.mark.parametrize("kwargs", [dict(affine=False), dict(track_running_stats=False),
                                    dict(affine=False, track_running_stats=False), dict(eps=1e-3)], ids=str)
def test_batch_norm_options(torch, kwargs):
    ours, theirs = _same(torch, nn.BatchNorm2d(2, **kwargs), torch.nn.BatchNorm2d(2, **kwargs))
    compare_module(torch, ours, theirs, [pair(torch, (3, 2, 3, 3), 0)])
    ours.eval()
    theirs.eval()
    compare_module(torch, ours, theirs, [pair(torch, (3, 2, 3, 3), 1)])
    assert list(ours.state_dict()) == list(theirs.state_dict())


@pytest.mark.oracle
@pytest.mark.parametrize("shape,normalized,kwargs", [((4, 5), 5, {}), ((2, 3, 4), (3, 4), {}),
                                                     ((2, 3, 4), 4, {"elementwise_affine": False}),
                                                     ((2, 3, 4), 4, {"bias": False, "eps": 1e-3})], ids=str)
def test_layer_norm(torch, shape, normalized, kwargs):
    ours, theirs = _same(torch, nn.LayerNorm(normalized, **kwargs), torch.nn.LayerNorm(normalized, **kwargs))
    if ours.weight is not None:
        with torch.no_grad():
            theirs.weight.uniform_(0.5, 1.5)
        ours.load_state_dict({k: gv.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    compare_module(torch, ours, theirs, [pair(torch, shape, 0)])
    assert repr(ours) == repr(theirs)


@pytest.mark.oracle
@pytest.mark.parametrize("groups,shape,affine", [(2, (3, 4, 5), True), (1, (2, 4, 3, 3), True),
                                                 (4, (2, 4, 2, 3), False)], ids=str)
def test_group_norm(torch, groups, shape, affine):
    ours, theirs = _same(torch, nn.GroupNorm(groups, 4, affine=affine), torch.nn.GroupNorm(groups, 4, affine=affine))
    if affine:
        with torch.no_grad():
            theirs.weight.uniform_(0.5, 1.5)
            theirs.bias.uniform_(-1, 1)
        ours.load_state_dict({k: gv.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    compare_module(torch, ours, theirs, [pair(torch, shape, 0)])
    assert repr(ours) == repr(theirs)


@pytest.mark.oracle
@pytest.mark.parametrize("kwargs", [{}, {"padding_idx": 2}, {"padding_idx": -1}, {"scale_grad_by_freq": True},
                                    {"max_norm": 1.0}, {"max_norm": 1.5, "norm_type": 1.0}], ids=str)
def test_embedding(torch, kwargs):
    ours, theirs = _same(torch, nn.Embedding(6, 4, **kwargs), torch.nn.Embedding(6, 4, **kwargs))
    idx = np.array([[0, 2, 5, 2], [3, 2, 1, 5]])
    out, tout = ours(gv.tensor(idx)), theirs(torch.tensor(idx))
    close(out, tout)
    close(ours.weight, theirs.weight)  # max_norm renormalises the looked-up rows in place
    g = np.random.default_rng(0).standard_normal(tuple(tout.shape))
    out.backward(gv.tensor(g))
    tout.backward(torch.tensor(g))
    close(ours.weight.grad, theirs.weight.grad)
    assert repr(ours) == repr(theirs)


@pytest.mark.oracle
def test_embedding_padding_row_is_zero_and_from_pretrained(torch):
    emb = nn.Embedding(5, 3, padding_idx=0)
    assert emb.weight.detach().numpy()[0].tolist() == [0.0, 0.0, 0.0]
    w = np.arange(6.0).reshape(3, 2)
    frozen = nn.Embedding.from_pretrained(gv.tensor(w))
    assert not frozen.weight.requires_grad
    assert frozen(gv.tensor([2, 0])).tolist() == [[4.0, 5.0], [0.0, 1.0]]


AVG_CONFIGS = [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
               dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
               dict(kernel_size=3, stride=2, ceil_mode=True), dict(kernel_size=(2, 3), stride=(1, 2), padding=(1, 1),
                                                                  ceil_mode=True, count_include_pad=False),
               dict(kernel_size=2, divisor_override=3)]


@pytest.mark.oracle
@pytest.mark.parametrize("config", AVG_CONFIGS, ids=str)
def test_avg_pool2d(torch, config):
    compare_module(torch, nn.AvgPool2d(**config), torch.nn.AvgPool2d(**config), [pair(torch, (2, 3, 7, 6), 0)])


@pytest.mark.oracle
@pytest.mark.parametrize("size,shape", [(1, (2, 3, 5, 7)), ((3, 4), (2, 3, 7, 9)), ((5, None), (3, 7, 6)),
                                        ((4, 3), (1, 2, 4, 3))], ids=str)
def test_adaptive_avg_pool2d(torch, size, shape):
    compare_module(torch, nn.AdaptiveAvgPool2d(size), torch.nn.AdaptiveAvgPool2d(size), [pair(torch, shape, 1)])


def test_dropout2d_zeroes_whole_channels_and_is_identity_in_eval():
    gv.manual_seed(0)
    layer = nn.Dropout2d(0.5)
    x = gv.ones(8, 16, 3, 3, requires_grad=True)
    out = layer(x)
    per_channel = out.detach().numpy().reshape(8, 16, 9)
    assert np.all((per_channel == 0) | (per_channel == 2.0))
    assert np.all(per_channel.min(axis=2) == per_channel.max(axis=2))  # a channel is all kept or all dropped
    assert 0.2 < (per_channel[:, :, 0] == 0).mean() < 0.8
    out.sum().backward()
    assert np.array_equal(x.grad.numpy(), per_channel.reshape(8, 16, 3, 3))
    layer.eval()
    assert layer(x) is x
    with pytest.warns(UserWarning, match="Received a 3D input to dropout2d"):
        F.dropout2d(gv.ones(2, 3, 4))


# ----- containers --------------------------------------------------------------------------------------------
@pytest.mark.oracle
def test_module_dict_and_parameter_list_register_like_pytorch(torch):
    ours = nn.ModuleDict({"a": nn.Linear(2, 3), "b": nn.ReLU()})
    ours["c"] = nn.Linear(3, 1)
    theirs = torch.nn.ModuleDict({"a": torch.nn.Linear(2, 3), "b": torch.nn.ReLU()})
    theirs["c"] = torch.nn.Linear(3, 1)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert list(ours.keys()) == ["a", "b", "c"] and "b" in ours and len(ours) == 3
    assert repr(ours) == repr(theirs)
    assert isinstance(ours.pop("b"), nn.ReLU) and list(ours) == ["a", "c"]
    with pytest.raises(TypeError, match="ModuleDict.update should be called with an iterable of key/value pairs, "
                                        "but got Linear"):
        ours.update(nn.Linear(1, 1))

    plist = nn.ParameterList([nn.Parameter(gv.zeros(2, 3)), gv.ones(4)])
    tlist = torch.nn.ParameterList([torch.nn.Parameter(torch.zeros(2, 3)), torch.ones(4)])
    assert isinstance(plist[1], nn.Parameter) and plist[1].requires_grad
    assert list(plist.state_dict()) == list(tlist.state_dict()) == ["0", "1"]
    assert repr(plist) == repr(tlist)
    assert len(list(plist.parameters())) == 2 and len(plist[0:1]) == 1
    with pytest.raises(RuntimeError, match="ParameterList should not be called."):
        plist()


# ----- attention and transformer -----------------------------------------------------------------------------
def _bool_mask(shape, seed, keep_first=True):
    m = np.random.default_rng(seed).random(shape) < 0.3
    if keep_first:
        m[..., 0] = False  # every query keeps at least one key: no all -inf row
    return m


MHA_CASES = [
    dict(),
    dict(batch_first=True),
    dict(attn_mask="bool"),
    dict(attn_mask="float", need_weights=True, average_attn_weights=False),
    dict(key_padding_mask=True, batch_first=True),
    dict(attn_mask="bool", key_padding_mask=True, average_attn_weights=False),
    dict(attn_mask="bool3d"),
    dict(need_weights=False),
    dict(module=dict(bias=False)),
    dict(module=dict(add_bias_kv=True, add_zero_attn=True), key_padding_mask=True, attn_mask="bool"),
    dict(module=dict(kdim=3, vdim=5)),
    dict(unbatched=True, key_padding_mask=True),
]


@pytest.mark.oracle
@pytest.mark.parametrize("case", MHA_CASES, ids=str)
def test_multihead_attention(torch, case):
    module = dict(case.get("module", {}))
    batch_first = case.get("batch_first", False)
    e, heads, n, lq, s = 6, 2, 3, 4, 5
    ours, theirs = _same(torch, nn.MultiheadAttention(e, heads, batch_first=batch_first, **module),
                         torch.nn.MultiheadAttention(e, heads, batch_first=batch_first, **module))
    kdim, vdim = module.get("kdim", e), module.get("vdim", e)

    def shape(length, dim):
        if case.get("unbatched"):
            return (length, dim)
        return (n, length, dim) if batch_first else (length, n, dim)

    q, k, v = pair(torch, shape(lq, e), 0), pair(torch, shape(s, kdim), 1), pair(torch, shape(s, vdim), 2)
    kw, tkw = {}, {}
    if case.get("attn_mask") == "bool":
        m = _bool_mask((lq, s), 3)
        kw["attn_mask"], tkw["attn_mask"] = gv.tensor(m), torch.tensor(m)
    elif case.get("attn_mask") == "bool3d":
        m = _bool_mask((n * heads, lq, s), 4)
        kw["attn_mask"], tkw["attn_mask"] = gv.tensor(m), torch.tensor(m)
    elif case.get("attn_mask") == "float":
        m = np.random.default_rng(5).standard_normal((lq, s))
        kw["attn_mask"], tkw["attn_mask"] = gv.tensor(m), torch.tensor(m)
    if case.get("key_padding_mask"):
        m = _bool_mask((s,) if case.get("unbatched") else (n, s), 6)
        kw["key_padding_mask"], tkw["key_padding_mask"] = gv.tensor(m), torch.tensor(m)
    for name in ("need_weights", "average_attn_weights"):
        if name in case:
            kw[name] = tkw[name] = case[name]
    outs = ours(q[0], k[0], v[0], **kw)
    touts = theirs(q[1], k[1], v[1], **tkw)
    assert (outs[1] is None) == (touts[1] is None)
    for o, to in zip(outs, touts):
        close(o, to)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    loss = outs[0].pow(2).sum() + (0 if outs[1] is None else (outs[1] * outs[1]).sum())
    tloss = touts[0].pow(2).sum() + (0 if touts[1] is None else (touts[1] * touts[1]).sum())
    loss.backward()
    tloss.backward()
    for a, b in (q, k, v):
        close(a.grad, b.grad)
    tparams = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        close(p.grad, tparams[name].grad)


@pytest.mark.oracle
def test_self_attention_with_shared_input_and_train_mode_dropout_zero(torch):
    ours, theirs = _same(torch, nn.MultiheadAttention(4, 4), torch.nn.MultiheadAttention(4, 4))
    x = pair(torch, (3, 2, 4), 0)
    compare_module(torch, ours, theirs, [x, x, x])


@pytest.mark.oracle
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("batch_first", [False, True])
def test_transformer_encoder_two_layers_eval(torch, norm_first, activation, batch_first):
    def build(mod):
        layer = mod.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.1, activation=activation,
                                            batch_first=batch_first, norm_first=norm_first)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's note that norm_first disables its nested-tensor path
            return mod.TransformerEncoder(layer, 2, norm=mod.LayerNorm(8), enable_nested_tensor=False)

    ours, theirs = _same(torch, build(nn), build(torch.nn))
    assert ours.layers[0].linear1.weight is not ours.layers[1].linear1.weight  # deep copies
    ours.eval()
    theirs.eval()
    shape = (2, 5, 8) if batch_first else (5, 2, 8)
    mask = np.triu(np.ones((5, 5), dtype=bool), 1)
    kpm = np.zeros((2, 5), dtype=bool)
    kpm[1, 3:] = True
    x = pair(torch, shape, 0)
    out = ours(x[0], mask=gv.tensor(mask), src_key_padding_mask=gv.tensor(kpm))
    tout = theirs(x[1], mask=torch.tensor(mask), src_key_padding_mask=torch.tensor(kpm))
    close(out, tout)
    g = np.random.default_rng(1).standard_normal(shape)
    out.backward(gv.tensor(g))
    tout.backward(torch.tensor(g))
    close(x[0].grad, x[1].grad)
    tparams = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        close(p.grad, tparams[name].grad)


def test_transformer_layer_trains_with_dropout_and_rejects_unknown_activation():
    gv.manual_seed(0)
    layer = nn.TransformerEncoderLayer(4, 2, dim_feedforward=8)
    out = layer(gv.randn(3, 2, 4))
    out.sum().backward()
    assert all(p.grad is not None for p in layer.parameters())
    with pytest.raises(RuntimeError, match="activation should be relu/gelu, not tanh"):
        nn.TransformerEncoderLayer(4, 2, activation="tanh")


# ----- error wording ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("call,error,message", [
    (lambda: nn.BatchNorm1d(3)(gv.randn(1, 3)), ValueError,
     r"Expected more than 1 value per channel when training, got input size torch.Size\(\[1, 3\]\)"),
    (lambda: nn.BatchNorm2d(3)(gv.randn(2, 3)), ValueError, r"expected 4D input \(got 2D input\)"),
    (lambda: nn.LayerNorm(5)(gv.randn(2, 4)), RuntimeError,
     r"Given normalized_shape=\[5\], expected input with shape \[\*, 5\], but got input of size\[2, 4\]"),
    (lambda: nn.GroupNorm(2, 3), ValueError, "num_channels must be divisible by num_groups"),
    (lambda: nn.Embedding(4, 2)(gv.tensor([4])), IndexError, "index out of range in self"),
    (lambda: nn.Embedding(4, 2)(gv.tensor([1.0])), RuntimeError,
     "Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int; but got "
     "torch.FloatTensor instead"),
    (lambda: nn.Embedding(4, 2, padding_idx=4), AssertionError, "Padding_idx must be within num_embeddings"),
    (lambda: nn.MultiheadAttention(5, 2), AssertionError, "embed_dim must be divisible by num_heads"),
    (lambda: nn.MultiheadAttention(4, 2)(gv.randn(3, 1, 4), gv.randn(3, 1, 4), gv.randn(3, 1, 4),
                                         attn_mask=gv.zeros(2, 3)), RuntimeError,
     r"The shape of the 2D attn_mask is torch.Size\(\[2, 3\]\), but should be \(3, 3\)."),
    (lambda: F.gelu(gv.randn(2), approximate="fast"), RuntimeError,
     "approximate argument must be either none or tanh."),
    (lambda: nn.Hardtanh(1.0, 0.5), AssertionError, r"max_val \(0.5\) must be greater than min_val \(1.0\)"),
])
def test_errors_use_pytorch_wording(call, error, message):
    with pytest.raises(error, match=message):
        call()


# ----- float32: outputs stay float32 and agree with PyTorch to float tolerance ---------------------------------
def _float32_modules(mod):
    return [
        (mod.LSTM(4, 5, num_layers=2, bidirectional=True, batch_first=True), (2, 6, 4)),
        (mod.GRU(4, 5), (6, 2, 4)),
        (mod.BatchNorm2d(3), (4, 3, 5, 5)),
        (mod.LayerNorm(4), (3, 6, 4)),
        (mod.GroupNorm(3, 6), (2, 6, 4)),
        (mod.GELU(), (5, 7)),
        (mod.TransformerEncoderLayer(4, 2, 8, dropout=0.0, batch_first=True), (2, 5, 4)),
        (mod.AdaptiveAvgPool2d(2), (2, 3, 5, 5)),
    ]


@pytest.mark.oracle
@pytest.mark.parametrize("index", range(8))
def test_float32_layers_match_pytorch_to_float_tolerance(torch, index):
    ours, shape = _float32_modules(nn)[index]
    theirs, _ = _float32_modules(torch.nn)[index]
    copy_weights(torch, ours, theirs)
    a = np.random.default_rng(index).standard_normal(shape).astype(np.float32)
    x, tx = gv.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    out, tout = ours(x), theirs(tx)
    out, tout = (out[0], tout[0]) if isinstance(out, tuple) else (out, tout)
    assert out.dtype == gv.float32
    close(out, tout, 1e-5)
    out.sum().backward()
    tout.sum().backward()
    close(x.grad, tx.grad, 1e-4)
    assert x.grad.dtype == gv.float32
    tparams = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        assert p.grad.dtype == gv.float32
        close(p.grad, tparams[name].grad, 1e-4)


def test_packed_projection_rows_gradients():
    from gradviz.ops.nn_layers import LinearRows

    x, w, b = _var((2, 3, 4), 20), _var((9, 4), 21), _var((9,), 22)
    assert gradcheck(lambda x, w, b: LinearRows.apply(x, w, b, rows=(3, 6), bias_rows=(3, 6)), (x, w, b))
    assert gradcheck(lambda x, w: LinearRows.apply(x, w, None, rows=(6, None)), (x, w))


@pytest.mark.parametrize("call,error,message", [
    (lambda: F.batch_norm(gv.ones(2, 3), None, None), RuntimeError, "running_mean must be defined in evaluation mode"),
    (lambda: F.avg_pool2d(gv.ones(1, 1, 5, 5), 3, padding=2), RuntimeError,
     "pad should be at most half of effective kernel size, but got pad=2, kernel_size=3 and dilation=1"),
    (lambda: F.avg_pool2d(gv.ones(1, 1, 5, 5), 2, divisor_override=0), RuntimeError, "divisor must be not zero"),
    (lambda: F.avg_pool2d(gv.ones(1, 1, 1, 1), 2), RuntimeError,
     r"Given input size: \(1x1x1\). Calculated output size: \(1x0x0\). Output size is too small"),
    (lambda: F.adaptive_avg_pool2d(gv.ones(5), 2), RuntimeError,
     r"adaptive_avg_pool2d\(\): Expected 3D or 4D tensor, but got \[5\]"),
    (lambda: F.group_norm(gv.ones(2, 5, 3), 2), RuntimeError,
     r"Expected number of channels in input to be divisible by num_groups, but got input of shape \[2, 5, 3\] and "
     "num_groups=2"),
    (lambda: F.hardtanh(gv.ones(2), 2.0, 1.0), ValueError, "min_val cannot be greater than max_val"),
])
def test_functional_errors_use_pytorch_wording(call, error, message):
    with pytest.raises(error, match=message):
        call()


# ----- 1-d convolution and pooling, BatchNorm3d ----------------------------------------------------------------
ONE_D = [
    ("Conv1d", (2, 3, 3), {}),
    ("Conv1d", (2, 4, 2), dict(stride=2, padding=1, dilation=2, bias=False)),
    ("Conv1d", (3, 2, 4), dict(padding="same")),  # even kernel: the extra padding goes last
    ("MaxPool1d", (3,), dict(stride=2, padding=1)),
    ("MaxPool1d", (2,), dict(ceil_mode=True)),
    ("AvgPool1d", (3,), dict(stride=2, padding=1, count_include_pad=False)),
    ("AdaptiveAvgPool1d", (4,), {}),
]


@pytest.mark.oracle
@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel")  # torch's note on its own copy
@pytest.mark.parametrize("name,args,kwargs", ONE_D, ids=[f"{n}-{a}-{k}" for n, a, k in ONE_D])
@pytest.mark.parametrize("batched", [True, False])
def test_one_d_layers(torch, name, args, kwargs, batched):
    ours, theirs = _same(torch, getattr(nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs))
    channels = args[0] if name == "Conv1d" else 2
    shape = ((3,) if batched else ()) + (channels, 9)
    compare_module(torch, ours, theirs, [pair(torch, shape, 0)])
    assert repr(ours) == repr(theirs)


@pytest.mark.oracle
def test_max_pool1d_indices_and_batch_norm3d(torch):
    x, tx = pair(torch, (2, 3, 8), 0)
    values, idx = F.max_pool1d(x, 3, 2, return_indices=True)
    tvalues, tidx = torch.nn.functional.max_pool1d(tx, 3, 2, return_indices=True)
    close(values, tvalues)
    assert idx.tolist() == tidx.tolist()
    ours, theirs = _same(torch, nn.BatchNorm3d(2), torch.nn.BatchNorm3d(2))
    compare_module(torch, ours, theirs, [pair(torch, (3, 2, 2, 3, 2), 1)])
    close(ours.running_var, theirs.running_var)
    with pytest.raises(ValueError, match=r"expected 5D input \(got 3D input\)"):
        ours(gv.ones(2, 2, 2))
    with pytest.raises(RuntimeError, match=r"Expected 2D \(unbatched\) or 3D \(batched\) input to conv1d, but got "
                                           r"input of size: \[3\]"):
        F.conv1d(gv.ones(3), gv.ones(2, 3, 1))


TRANSPOSED = [dict(), dict(stride=2, padding=1, output_padding=1), dict(stride=(2, 3), padding=(0, 1), dilation=2),
              dict(stride=2, bias=False), dict(kernel_size=(2, 4), stride=3, output_padding=2, padding=1)]


@pytest.mark.oracle
@pytest.mark.parametrize("config", TRANSPOSED, ids=str)
@pytest.mark.parametrize("batched", [True, False])
def test_conv_transpose2d(torch, config, batched):
    config = dict({"kernel_size": 3}, **config)
    ours, theirs = _same(torch, nn.ConvTranspose2d(3, 2, **config), torch.nn.ConvTranspose2d(3, 2, **config))
    shape = ((2,) if batched else ()) + (3, 4, 5)
    compare_module(torch, ours, theirs, [pair(torch, shape, 0)])
    assert repr(ours) == repr(theirs)


def test_conv_transpose2d_gradients_and_output_size():
    x, w, b = _var((2, 2, 3, 4), 30), _var((2, 3, 3, 2), 31), _var((3,), 32)
    assert gradcheck(lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1), (x, w, b))
    up = nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1)
    assert tuple(up(gv.randn(1, 4, 5, 5), output_size=[10, 10]).shape) == (1, 2, 10, 10)
    with pytest.raises(ValueError, match=r"requested an output size of \[12, 12\], but valid sizes range from "
                                         r"\[9, 9\] to \[10, 10\] \(for an input of torch.Size\(\[5, 5\]\)\)"):
        up(gv.randn(1, 4, 5, 5), output_size=[12, 12])
    with pytest.raises(RuntimeError, match="output padding must be smaller than either stride or dilation"):
        F.conv_transpose2d(gv.randn(1, 2, 3, 3), gv.randn(2, 2, 3, 3), output_padding=1)


# ----- the smaller activations ----------------------------------------------------------------------------------
MORE_ACTIVATIONS = [("SELU", {}), ("CELU", {"alpha": 0.6}), ("Mish", {}), ("Hardswish", {}), ("Hardsigmoid", {}),
                    ("LogSigmoid", {}), ("Softsign", {}), ("Tanhshrink", {}), ("Threshold", dict(threshold=0.3,
                                                                                                 value=-2.0)),
                    ("GLU", {}), ("GLU", {"dim": 1}), ("PReLU", {}), ("PReLU", {"num_parameters": 4, "init": 0.1})]


@pytest.mark.oracle
@pytest.mark.parametrize("name,kwargs", MORE_ACTIVATIONS, ids=[f"{a}-{b}" for a, b in MORE_ACTIVATIONS])
def test_more_activation_modules(torch, name, kwargs):
    ours, theirs = _same(torch, getattr(nn, name)(**kwargs), getattr(torch.nn, name)(**kwargs))
    compare_module(torch, ours, theirs, [pair(torch, (3, 4, 6), 0, -5, 5)])
    assert repr(ours) == repr(theirs)


@pytest.mark.oracle
@pytest.mark.parametrize("fn", ["selu", "celu", "mish", "hardswish", "hardsigmoid"])
def test_more_inplace_activations(torch, fn):
    x, tx = pair(torch, (3, 4), 1, -4, 4)
    a, ta = x * 1.0, tx * 1.0
    assert getattr(F, fn)(a, inplace=True) is a
    getattr(torch.nn.functional, fn)(ta, inplace=True)
    close(a, ta)
    a.sum().backward()
    ta.sum().backward()
    close(x.grad, tx.grad)


SMALL_ACTIVATIONS = [("selu", F.selu), ("celu", lambda x: F.celu(x, 0.7)), ("mish", F.mish),
                     ("hardswish", F.hardswish), ("hardsigmoid", F.hardsigmoid), ("logsigmoid", F.logsigmoid),
                     ("softsign", F.softsign), ("tanhshrink", F.tanhshrink), ("glu", lambda x: F.glu(x, 0))]


@pytest.mark.parametrize("name,fn", SMALL_ACTIVATIONS, ids=[a[0] for a in SMALL_ACTIVATIONS])
def test_small_activation_gradients(name, fn):
    x = gv.tensor([[-3.7, -2.3, -0.9, -0.31], [0.13, 0.95, 2.2, 3.6]], dtype=gv.float64, requires_grad=True)
    assert gradcheck(fn, (x,))


def test_prelu_gradients_reach_the_slopes():
    x, w = _var((2, 3, 4), 40), gv.tensor([0.2, -0.5, 1.5], dtype=gv.float64, requires_grad=True)
    assert gradcheck(F.prelu, (x, w))
    with pytest.raises(RuntimeError, match="Mismatch of parameter numbers and input channel size. Found parameter "
                                           "numbers = 2 and channel size = 3."):
        F.prelu(x, gv.ones(2, dtype=gv.float64))
    with pytest.raises(RuntimeError, match="Halving dimension must be even, but dimension 1 is size 3"):
        F.glu(x, 1)


# ----- padding, normalize, Unflatten, ParameterDict --------------------------------------------------------------
PADS = [("constant", (1, 2)), ("constant", (2, 0, -1, 1)), ("reflect", (2, 1, 1, 2)), ("replicate", (0, 3, 2, 1)),
        ("circular", (1, 2, 2, 0)), ("reflect", (1, 1))]


@pytest.mark.oracle
@pytest.mark.parametrize("mode,amounts", PADS, ids=str)
def test_pad_matches_pytorch(torch, mode, amounts):
    x, tx = pair(torch, (2, 3, 4, 5) if len(amounts) == 4 else (3, 4, 5), 0)  # torch's non-constant modes pad
    # the last dim of 2-d/3-d inputs, the last two of 3-d/4-d ones
    kwargs = {"value": 1.5} if mode == "constant" else {}
    out = F.pad(x, amounts, mode=mode, **kwargs)
    tout = torch.nn.functional.pad(tx, amounts, mode=mode, **kwargs)
    close(out, tout)
    g = np.random.default_rng(1).standard_normal(tuple(tout.shape))
    out.backward(gv.tensor(g))
    tout.backward(torch.tensor(g))
    close(x.grad, tx.grad)


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_pad_gradients(mode):
    assert gradcheck(lambda a: F.pad(a, (2, 1, 1, 2), mode=mode), (_var((2, 3, 4), 50),))


PAD_MODULES = [("ZeroPad2d", (2,)), ("ZeroPad1d", ((1, 2),)), ("ConstantPad1d", ((1, 2), 3.5)),
               ("ConstantPad2d", (1, -1.0)), ("ReflectionPad1d", (2,)), ("ReflectionPad2d", ((1, 0, 2, 1),)),
               ("ReplicationPad1d", ((0, 2),)), ("ReplicationPad2d", (1,)), ("CircularPad1d", (1,)),
               ("CircularPad2d", ((1, 2, 0, 1),))]


@pytest.mark.oracle
@pytest.mark.parametrize("name,args", PAD_MODULES, ids=[f"{n}-{a}" for n, a in PAD_MODULES])
def test_padding_modules(torch, name, args):
    ours, theirs = getattr(nn, name)(*args), getattr(torch.nn, name)(*args)
    compare_module(torch, ours, theirs, [pair(torch, (2, 3, 4, 5) if "2d" in name else (3, 4, 5), 2)])
    assert repr(ours) == repr(theirs)


def test_pad_errors_use_pytorch_wording():
    with pytest.raises(RuntimeError, match="Padding length must be divisible by 2"):
        F.pad(gv.ones(2, 3), (1,))
    with pytest.raises(RuntimeError, match="Padding length should be less than or equal to two times the input "
                                           "dimension but got padding length 6 and input of dimension 2"):
        F.pad(gv.ones(2, 3), (1, 1, 1, 1, 1, 1))
    with pytest.raises(RuntimeError, match=r"Argument #4: Padding size should be less than the corresponding input "
                                           r"dimension, but got: padding \(3, 3\) at dimension 2 of input \[1, 1, 3\]"):
        F.pad(gv.ones(1, 1, 3), (3, 3), mode="reflect")


@pytest.mark.oracle
@pytest.mark.parametrize("p,dim", [(2.0, 1), (1.0, -1), (3.0, 0), (float("inf"), 1)])
def test_normalize(torch, p, dim):
    x, tx = pair(torch, (3, 4, 2), 3)
    out, tout = F.normalize(x, p=p, dim=dim), torch.nn.functional.normalize(tx, p=p, dim=dim)
    close(out, tout)
    out.sum().backward()
    tout.sum().backward()
    close(x.grad, tx.grad)


@pytest.mark.oracle
def test_unflatten_and_parameter_dict(torch):
    ours, theirs = nn.Unflatten(1, (2, -1)), torch.nn.Unflatten(1, (2, -1))
    compare_module(torch, ours, theirs, [pair(torch, (3, 8, 2), 4)])
    assert repr(ours) == repr(theirs)
    pd = nn.ParameterDict({"a": nn.Parameter(gv.ones(2)), "b": gv.zeros(3, 2)})
    tpd = torch.nn.ParameterDict({"a": torch.nn.Parameter(torch.ones(2)), "b": torch.zeros(3, 2)})
    assert isinstance(pd["b"], nn.Parameter) and list(pd) == ["a", "b"] and "a" in pd
    assert list(pd.state_dict()) == list(tpd.state_dict())
    assert repr(pd) == repr(tpd)
    with pytest.raises(RuntimeError, match="ParameterDict should not be called."):
        pd()


@pytest.mark.oracle
@pytest.mark.parametrize("kwargs", [{}, dict(affine=True), dict(track_running_stats=True),
                                    dict(affine=True, track_running_stats=True, momentum=0.3)], ids=str)
@pytest.mark.parametrize("cls,shape", [("InstanceNorm1d", (3, 2, 5)), ("InstanceNorm2d", (2, 2, 3, 4)),
                                       ("InstanceNorm2d", (2, 3, 4))], ids=str)
def test_instance_norm(torch, cls, shape, kwargs):
    ours, theirs = _same(torch, getattr(nn, cls)(2, **kwargs), getattr(torch.nn, cls)(2, **kwargs))
    if kwargs.get("affine"):
        with torch.no_grad():
            theirs.weight.uniform_(0.5, 1.5)
            theirs.bias.uniform_(-1, 1)
        ours.load_state_dict({k: gv.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    for step in range(2):
        compare_module(torch, ours, theirs, [pair(torch, shape, step)])
        for name, buf in theirs.named_buffers():
            close(getattr(ours, name), buf)
    ours.eval()
    theirs.eval()
    compare_module(torch, ours, theirs, [pair(torch, shape, 5)])
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert repr(ours) == repr(theirs)


# ----- interpolation ----------------------------------------------------------------------------------------------
INTERPOLATIONS = [dict(scale_factor=2), dict(scale_factor=1.5), dict(size=(7, 3)), dict(scale_factor=(2.5, 0.5)),
                  dict(size=(6, 9), mode="nearest-exact"), dict(scale_factor=1.7, mode="bilinear"),
                  dict(size=(7, 4), mode="bilinear"), dict(size=(8, 2), mode="bilinear", align_corners=True),
                  dict(scale_factor=2, mode="bilinear", align_corners=True), dict(size=(2, 3), mode="area"),
                  dict(scale_factor=2.2, mode="bilinear", recompute_scale_factor=True)]


@pytest.mark.oracle
@pytest.mark.parametrize("kwargs", INTERPOLATIONS, ids=str)
def test_interpolate_2d(torch, kwargs):
    x, tx = pair(torch, (2, 3, 4, 5), 0)
    out, tout = F.interpolate(x, **kwargs), torch.nn.functional.interpolate(tx, **kwargs)
    close(out, tout)
    g = np.random.default_rng(1).standard_normal(tuple(tout.shape))
    out.backward(gv.tensor(g))
    tout.backward(torch.tensor(g))
    close(x.grad, tx.grad)


@pytest.mark.oracle
@pytest.mark.parametrize("kwargs", [dict(scale_factor=3), dict(size=7, mode="linear"),
                                    dict(size=4, mode="linear", align_corners=True), dict(size=3, mode="area")],
                         ids=str)
def test_interpolate_1d(torch, kwargs):
    x, tx = pair(torch, (2, 3, 5), 1)
    compare_module(torch, _Call(lambda a: F.interpolate(a, **kwargs)),
                   _Call(lambda a: torch.nn.functional.interpolate(a, **kwargs)), [(x, tx)])


class _Call:
    """A function seen as a parameterless module (for compare_module)."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, *args):
        return self.fn(*args)

    def named_parameters(self):
        return iter(())


@pytest.mark.oracle
@pytest.mark.parametrize("name,kwargs", [("Upsample", dict(scale_factor=2)),
                                         ("Upsample", dict(size=(3, 4), mode="bilinear", align_corners=True)),
                                         ("UpsamplingNearest2d", dict(scale_factor=2)),
                                         ("UpsamplingBilinear2d", dict(size=5))], ids=str)
def test_upsample_modules(torch, name, kwargs):
    ours, theirs = getattr(nn, name)(**kwargs), getattr(torch.nn, name)(**kwargs)
    compare_module(torch, ours, theirs, [pair(torch, (1, 2, 3, 3), 2)])
    assert repr(ours) == repr(theirs)


def test_interpolate_gradients_and_errors():
    x = _var((1, 2, 3, 4), 60)
    assert gradcheck(lambda a: F.interpolate(a, scale_factor=1.5, mode="bilinear"), (x,))
    with pytest.raises(ValueError, match="align_corners option can only be set with the interpolating modes: "
                                         "linear | bilinear | bicubic | trilinear"):
        F.interpolate(x, size=4, mode="nearest", align_corners=True)
    with pytest.raises(ValueError, match="either size or scale_factor should be defined"):
        F.interpolate(x)
    with pytest.raises(ValueError, match="only one of size or scale_factor should be defined"):
        F.interpolate(x, size=2, scale_factor=2)
    with pytest.raises(NotImplementedError, match="Got 4D input, but linear mode needs 3D input"):
        F.interpolate(x, size=5, mode="linear")


# ----- adaptive max pooling, softmin / softmax2d, pixel shuffle ---------------------------------------------------
@pytest.mark.oracle
@pytest.mark.parametrize("name,size,shape", [("AdaptiveMaxPool2d", (2, 3), (2, 3, 5, 7)),
                                             ("AdaptiveMaxPool2d", 1, (2, 3, 4, 4)),
                                             ("AdaptiveMaxPool2d", (3, None), (3, 5, 4)),
                                             ("AdaptiveMaxPool1d", 3, (2, 3, 7))], ids=str)
def test_adaptive_max_pool(torch, name, size, shape):
    ours, theirs = getattr(nn, name)(size), getattr(torch.nn, name)(size)
    compare_module(torch, ours, theirs, [pair(torch, shape, 0)])
    assert repr(ours) == repr(theirs)
    x, tx = pair(torch, shape, 1)
    _, idx = getattr(nn, name)(size, return_indices=True)(x)
    _, tidx = getattr(torch.nn, name)(size, return_indices=True)(tx)
    assert idx.tolist() == tidx.tolist()


@pytest.mark.oracle
@pytest.mark.parametrize("name,args,shape", [("Softmin", (1,), (3, 4)), ("Softmax2d", (), (2, 3, 2, 2)),
                                             ("Softmax2d", (), (3, 2, 2)), ("PixelShuffle", (2,), (2, 8, 3, 2)),
                                             ("PixelShuffle", (3,), (9, 2, 2)),
                                             ("PixelUnshuffle", (2,), (2, 3, 4, 6))], ids=str)
def test_shape_and_softmax_modules(torch, name, args, shape):
    ours, theirs = getattr(nn, name)(*args), getattr(torch.nn, name)(*args)
    compare_module(torch, ours, theirs, [pair(torch, shape, 0)])
    assert repr(ours) == repr(theirs)


def test_pixel_shuffle_errors_use_pytorch_wording():
    with pytest.raises(RuntimeError, match=r"pixel_shuffle expects its input's 'channel' dimension to be divisible by "
                                           r"the square of upscale_factor, but input.size\(-3\)=5 is not divisible "
                                           "by 4"):
        F.pixel_shuffle(gv.ones(1, 5, 2, 2), 2)
    with pytest.raises(RuntimeError, match=r"pixel_unshuffle expects height to be divisible by downscale_factor, but "
                                           r"input.size\(-2\)=3 is not divisible by 2"):
        F.pixel_unshuffle(gv.ones(1, 1, 3, 4), 2)
    with pytest.raises(ValueError, match="Softmax2d: expected input to be 3D or 4D, got 2D instead"):
        nn.Softmax2d()(gv.ones(3, 4))


# ----- EmbeddingBag --------------------------------------------------------------------------------------------------
BAGS = [dict(mode="mean"), dict(mode="sum"), dict(mode="max"), dict(mode="mean", padding_idx=2),
        dict(mode="max", padding_idx=0), dict(mode="sum", include_last_offset=True), dict(mode="sum", max_norm=1.0)]


# include_last_offset only means something with an offsets tensor: no 2-d case for it
BAG_CASES = [(k, layout) for k in BAGS for layout in ("offsets", "2d")
             if not (layout == "2d" and k.get("include_last_offset"))]


@pytest.mark.oracle
@pytest.mark.parametrize("kwargs, layout", BAG_CASES, ids=str)
def test_embedding_bag(torch, kwargs, layout):
    ours, theirs = _same(torch, nn.EmbeddingBag(7, 3, **kwargs), torch.nn.EmbeddingBag(7, 3, **kwargs))
    if layout == "2d":
        idx = np.array([[1, 2, 2, 0], [3, 3, 6, 5], [2, 2, 2, 2]])
        args, targs = [gv.tensor(idx)], [torch.tensor(idx)]
    else:
        idx = np.array([1, 2, 4, 0, 2, 6, 6, 5, 3])
        offsets = np.array([0, 3, 3, 5] + ([9] if kwargs.get("include_last_offset") else []))  # bag 1 is empty
        args, targs = [gv.tensor(idx), gv.tensor(offsets)], [torch.tensor(idx), torch.tensor(offsets)]
    out, tout = ours(*args), theirs(*targs)
    close(out, tout)
    close(ours.weight, theirs.weight)
    g = np.random.default_rng(0).standard_normal(tuple(tout.shape))
    out.backward(gv.tensor(g))
    tout.backward(torch.tensor(g))
    close(ours.weight.grad, theirs.weight.grad)
    assert repr(ours) == repr(theirs)


@pytest.mark.oracle
def test_embedding_bag_per_sample_weights(torch):
    ours, theirs = _same(torch, nn.EmbeddingBag(6, 2, mode="sum"), torch.nn.EmbeddingBag(6, 2, mode="sum"))
    idx, offsets = np.array([0, 5, 5, 1, 2]), np.array([0, 2])
    w, tw = pair(torch, (5,), 1)
    out = ours(gv.tensor(idx), gv.tensor(offsets), per_sample_weights=w)
    tout = theirs(torch.tensor(idx), torch.tensor(offsets), per_sample_weights=tw)
    close(out, tout)
    out.sum().backward()
    tout.sum().backward()
    close(w.grad, tw.grad)
    close(ours.weight.grad, theirs.weight.grad)
    with pytest.raises(NotImplementedError, match="per_sample_weights is only supported for mode='sum' \\(got "
                                                  "mode='mean'\\)"):
        nn.EmbeddingBag(6, 2)(gv.tensor(idx), gv.tensor(offsets), per_sample_weights=w)
    with pytest.raises(ValueError, match="offsets has to be a 1D Tensor but got None"):
        ours(gv.tensor(idx))
    with pytest.raises(RuntimeError, match="offsets\\[0\\] has to be 0"):
        ours(gv.tensor(idx), gv.tensor([1, 2]))


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_gradients(mode):
    w = _var((6, 3), 70)
    idx, offsets = gv.tensor([0, 5, 5, 1, 2, 4]), gv.tensor([0, 2, 2])
    assert gradcheck(lambda w: F.embedding_bag(idx, w, offsets, mode=mode), (w,))
    if mode == "sum":
        psw = _var((6,), 71)
        assert gradcheck(lambda w, p: F.embedding_bag(idx, w, offsets, mode="sum", per_sample_weights=p), (w, psw))


# ----- Unfold / Fold -------------------------------------------------------------------------------------------------
FOLDS = [dict(kernel_size=2), dict(kernel_size=(2, 3), stride=2, padding=1), dict(kernel_size=3, dilation=2, padding=2)]


@pytest.mark.oracle
@pytest.mark.parametrize("kwargs", FOLDS, ids=str)
@pytest.mark.parametrize("batched", [True, False])
def test_unfold_and_fold(torch, kwargs, batched):
    lead = (2,) if batched else ()
    ours, theirs = nn.Unfold(**kwargs), torch.nn.Unfold(**kwargs)
    outs, _ = compare_module(torch, ours, theirs, [pair(torch, lead + (3, 6, 7), 0)])
    assert repr(ours) == repr(theirs)
    ours, theirs = nn.Fold((6, 7), **kwargs), torch.nn.Fold((6, 7), **kwargs)
    compare_module(torch, ours, theirs, [pair(torch, tuple(outs[0].shape), 1)])
    assert repr(ours) == repr(theirs)


def test_unfold_fold_gradients_and_errors():
    x = _var((1, 2, 4, 5), 80)
    assert gradcheck(lambda a: F.unfold(a, 2, stride=(1, 2), padding=1), (x,))
    cols = _var((1, 8, 6), 81)
    assert gradcheck(lambda c: F.fold(c, (3, 4), 2), (cols,))
    with pytest.raises(RuntimeError, match=r"Expected size of input's dimension 1 to be divisible by the product of "
                                           r"kernel_size, but got input.size\(1\)=5 and kernel_size=\(2, 2\)."):
        F.fold(gv.ones(1, 5, 9), (4, 4), 2)
    with pytest.raises(RuntimeError, match=r"expected size of input's dimension 2 to match the calculated number of "
                                           r"sliding blocks 3 \* 3 = 9, but got input.size\(2\)=8."):
        F.fold(gv.ones(1, 4, 8), (4, 4), 2)


@pytest.mark.oracle
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("lead", [(5,), (2, 3), ()], ids=str)
def test_bilinear(torch, bias, lead):
    ours, theirs = _same(torch, nn.Bilinear(3, 4, 2, bias=bias), torch.nn.Bilinear(3, 4, 2, bias=bias))
    compare_module(torch, ours, theirs, [pair(torch, lead + (3,), 0), pair(torch, lead + (4,), 1)])
    assert repr(ours) == repr(theirs)


@pytest.mark.oracle
@pytest.mark.parametrize("shape,normalized,kwargs", [((3, 4), 4, {}), ((2, 3, 4), (3, 4), dict(eps=1e-3)),
                                                     ((2, 5), 5, dict(elementwise_affine=False))], ids=str)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_rms_norm(torch, shape, normalized, kwargs, dtype):
    ours, theirs = nn.RMSNorm(normalized, **kwargs), torch.nn.RMSNorm(normalized, **kwargs)
    if dtype == "float64":
        ours.double()
        theirs.double()
    if ours.weight is not None:
        with torch.no_grad():
            theirs.weight.uniform_(0.5, 1.5)
        ours.load_state_dict({k: gv.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    a = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    x, tx = gv.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    out, tout = ours(x), theirs(tx)
    tol = 1e-6 if dtype == "float64" else 1e-5
    close(out, tout, tol)
    out.sum().backward()
    tout.sum().backward()
    close(x.grad, tx.grad, tol)
    assert repr(ours) == repr(theirs)


def test_dropout1d_and_3d_drop_whole_channels():
    gv.manual_seed(1)
    out = nn.Dropout1d(0.5)(gv.ones(8, 16, 5)).numpy()
    assert np.all(out.min(axis=2) == out.max(axis=2)) and 0 < (out[:, :, 0] == 0).mean() < 1
    out = nn.Dropout3d(0.5)(gv.ones(4, 8, 2, 3, 2)).numpy().reshape(4, 8, -1)
    assert np.all(out.min(axis=2) == out.max(axis=2)) and 0 < (out[:, :, 0] == 0).mean() < 1
    assert tuple(F.dropout1d(gv.ones(3, 5), 0.5).shape) == (3, 5)
    with pytest.raises(RuntimeError, match="dropout1d: Expected 2D or 3D input, but received a 4D input"):
        F.dropout1d(gv.ones(2, 3, 4, 5))
