"""The declarative gradient table: every differentiable op of the engine, as data.

Each ``Case`` names an op as a function of float64 Variables, the shapes of those inputs, how to draw their
values (``domain``), and optionally a numpy reference for the forward value. ``run_case`` checks the forward
against the reference and the backward against central differences with ``gradviz.autograd.gradcheck``.
Adding an op to the engine means adding a line here.
"""

import math
from dataclasses import dataclass, field

import numpy as np

import gradviz as gv


@dataclass(frozen=True)
class Case:
    name: str
    fn: object  # (*Variables) -> Variable or tuple of Variables
    shapes: tuple  # one shape per input Variable (all float64, all requiring grad)
    ref: object = None  # (*numpy arrays) -> numpy array: the expected forward value
    domain: str = "normal"  # "normal", "positive" (for log/sqrt/pow bases) or "nonzero" (away from 0)
    eps: float = 1e-6
    atol: float = 1e-5
    rtol: float = 1e-3
    extra: dict = field(default_factory=dict)

    def __str__(self):
        return self.name


def draw(case, seed=0):
    """The input arrays of a case: reproducible, and away from kinks where the domain asks for it."""
    rng = np.random.default_rng(seed)
    arrays = []
    for shape in case.shapes:
        a = rng.standard_normal(shape)
        if case.domain == "positive":
            a = np.abs(a) + 0.5
        elif case.domain == "nonzero":
            a = np.sign(a) * (np.abs(a) + 0.3) + np.where(a == 0, 0.5, 0)
        arrays.append(np.asarray(a, dtype=np.float64))
    return arrays


def run_case(case, seed=0):
    arrays = draw(case, seed)
    inputs = [gv.tensor(a, dtype=gv.float64, requires_grad=True) for a in arrays]
    if case.ref is not None:
        out = case.fn(*inputs)
        got = out[0] if isinstance(out, tuple) else out
        np.testing.assert_allclose(got.detach().numpy(), case.ref(*arrays), rtol=1e-12, atol=1e-12)
        assert got.dtype == np.float64, f"{case.name}: forward changed the dtype to {got.dtype}"
    assert gv.autograd.gradcheck(case.fn, inputs, eps=case.eps, atol=case.atol, rtol=case.rtol)


# ----- index helpers (built once; they are data, not inputs) ---------------------------------------------
_MASK = np.array([[True, False, True, False], [False, False, True, True], [True, True, False, False]])
_IDX_2D = np.array([[0, 2], [2, 2]])
_COND = np.array([[True, False, False, True], [False, True, True, False], [True, True, False, False]])


def _np_softmax(x, d):
    e = np.exp(x - x.max(axis=d, keepdims=True))
    return e / e.sum(axis=d, keepdims=True)


BROADCAST_PAIRS = [((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 1), (1, 4)), ((2, 3, 4), (3, 1)), ((), (3,)),
                   ((5,), ()), ((2, 1, 4), (3, 1))]

CASES = []


def case(*args, **kwargs):
    CASES.append(Case(*args, **kwargs))


# ----- binary arithmetic, with broadcasting ----------------------------------------------------------------
for sa, sb in BROADCAST_PAIRS:
    tag = f"{list(sa)}x{list(sb)}"
    case(f"add {tag}", lambda a, b: a + b, (sa, sb), np.add)
    case(f"sub {tag}", lambda a, b: a - b, (sa, sb), np.subtract)
    case(f"mul {tag}", lambda a, b: a * b, (sa, sb), np.multiply)
    case(f"div {tag}", lambda a, b: a / b, (sa, sb), np.divide, domain="nonzero")
    case(f"pow tensor exponent {tag}", lambda a, b: a ** b, (sa, sb), np.power, domain="positive")
    case(f"maximum {tag}", lambda a, b: gv.maximum(a, b), (sa, sb), np.maximum)
    case(f"minimum {tag}", lambda a, b: gv.minimum(a, b), (sa, sb), np.minimum)

# ----- scalars, reflected operators, unary minus ------------------------------------------------------------
case("add scalar", lambda x: x + 2.5, ((3, 2),), lambda x: x + 2.5)
case("radd scalar", lambda x: 2.5 + x, ((3, 2),), lambda x: 2.5 + x)
case("sub scalar", lambda x: x - 1.5, ((3, 2),), lambda x: x - 1.5)
case("rsub scalar", lambda x: 1.5 - x, ((3, 2),), lambda x: 1.5 - x)
case("mul scalar", lambda x: x * -3.0, ((3, 2),), lambda x: x * -3.0)
case("rmul scalar", lambda x: -3.0 * x, ((3, 2),), lambda x: -3.0 * x)
case("div scalar", lambda x: x / 4.0, ((3, 2),), lambda x: x / 4.0)
case("rdiv scalar", lambda x: 4.0 / x, ((3, 2),), lambda x: 4.0 / x, domain="nonzero")
case("radd ndarray", lambda x: np.arange(4.0) + x, ((3, 4),), lambda x: np.arange(4.0) + x)
case("rmul ndarray", lambda x: np.arange(4.0) * x, ((3, 4),), lambda x: np.arange(4.0) * x)
case("rsub ndarray", lambda x: np.arange(4.0) - x, ((3, 4),), lambda x: np.arange(4.0) - x)
case("neg", lambda x: -x, ((3, 2),), np.negative)
case("neg method", lambda x: x.neg(), ((3, 2),), np.negative)
case("pow int exponent", lambda x: x ** 3, ((3, 2),), lambda x: x ** 3)
case("pow method", lambda x: x.pow(3), ((3, 2),), lambda x: x ** 3)
case("pow float exponent", lambda x: x ** 0.5, ((3, 2),), np.sqrt, domain="positive")
case("pow negative exponent", lambda x: x ** -1.5, ((3, 2),), lambda x: x ** -1.5, domain="positive")
case("pow zero exponent", lambda x: x ** 0, ((3, 2),), lambda x: x ** 0)
case("rpow", lambda x: 2.0 ** x, ((3, 2),), lambda x: 2.0 ** x)
case("gv.pow scalar base", lambda x: gv.pow(3.0, x), ((3, 2),), lambda x: 3.0 ** x)
case("add alpha", lambda a, b: a.add(b, alpha=2.0), ((3,), (3,)), lambda a, b: a + 2 * b)
case("sub alpha", lambda a, b: gv.sub(a, b, alpha=0.5), ((3,), (3,)), lambda a, b: a - 0.5 * b)
case("same input twice", lambda x: x * x + x, ((4,),), lambda x: x * x + x)

# ----- matmul: 1-D, 2-D, batched, broadcast batches ----------------------------------------------------------
for sa, sb in [((3,), (3,)), ((3,), (3, 4)), ((2, 3), (3,)), ((2, 3), (3, 4)), ((5, 2, 3), (3, 4)),
               ((2, 3), (5, 3, 4)), ((5, 2, 3), (5, 3, 4)), ((2, 1, 2, 3), (5, 3, 4)), ((3,), (5, 3, 4)),
               ((5, 2, 3), (3,))]:
    case(f"matmul {list(sa)}@{list(sb)}", lambda a, b: a @ b, (sa, sb), np.matmul)
case("matmul method", lambda a, b: a.matmul(b), ((2, 3), (3, 2)), np.matmul)
case("gv.matmul", lambda a, b: gv.matmul(a, b), ((4, 3), (3,)), np.matmul)
case("mm", lambda a, b: a.mm(b), ((2, 3), (3, 4)), np.matmul)
case("gv.mm", lambda a, b: gv.mm(a, b), ((2, 3), (3, 4)), np.matmul)
case("rmatmul ndarray", lambda x: np.ones((2, 3)) @ x, ((3, 4),), lambda x: np.ones((2, 3)) @ x)

# ----- pointwise ------------------------------------------------------------------------------------------
case("exp", lambda x: x.exp(), ((3, 4),), np.exp)
case("gv.exp", lambda x: gv.exp(x), ((3, 4),), np.exp)
case("log", lambda x: x.log(), ((3, 4),), np.log, domain="positive")
case("gv.log", lambda x: gv.log(x), ((3, 4),), np.log, domain="positive")
case("sqrt", lambda x: x.sqrt(), ((3, 4),), np.sqrt, domain="positive")
case("abs", lambda x: x.abs(), ((3, 4),), np.abs, domain="nonzero")
case("builtin abs", lambda x: abs(x), ((3, 4),), np.abs, domain="nonzero")
case("sin", lambda x: x.sin(), ((3, 4),), np.sin)
case("cos", lambda x: gv.cos(x), ((3, 4),), np.cos)
case("tanh", lambda x: x.tanh(), ((3, 4),), np.tanh)
case("sigmoid", lambda x: x.sigmoid(), ((3, 4),), lambda x: 1 / (1 + np.exp(-x)))
case("gv.sigmoid large", lambda x: gv.sigmoid(x * 20), ((3, 4),), lambda x: 1 / (1 + np.exp(-20 * x)))
case("relu", lambda x: x.relu(), ((3, 4),), lambda x: np.maximum(x, 0), domain="nonzero")
case("gv.relu", lambda x: gv.relu(x), ((3, 4),), lambda x: np.maximum(x, 0), domain="nonzero")
case("clamp both", lambda x: x.clamp(-0.5, 0.7), ((4, 5),), lambda x: np.clip(x, -0.5, 0.7))
case("clamp min", lambda x: x.clamp(min=0.1), ((4, 5),), lambda x: np.maximum(x, 0.1))
case("clamp max", lambda x: gv.clamp(x, max=-0.1), ((4, 5),), lambda x: np.minimum(x, -0.1))
case("clip", lambda x: x.clip(-0.2, 0.2), ((4, 5),), lambda x: np.clip(x, -0.2, 0.2))
case("norm", lambda x: x.norm(), ((3, 4),), np.linalg.norm)
case("norm dim", lambda x: x.norm(dim=1), ((3, 4),), lambda x: np.linalg.norm(x, axis=1))

# ----- reductions over each axis ----------------------------------------------------------------------------
for dim in (None, 0, 1, 2, -1, (0, 2)):
    for keepdim in (False, True):
        tag = f"dim={dim} keepdim={keepdim}"
        d = dim if not isinstance(dim, tuple) else dim
        case(f"sum {tag}", lambda x, d=d, k=keepdim: x.sum(dim=d, keepdim=k), ((2, 3, 4),),
             lambda x, d=d, k=keepdim: np.sum(x, axis=d, keepdims=k))
        case(f"mean {tag}", lambda x, d=d, k=keepdim: x.mean(dim=d, keepdim=k), ((2, 3, 4),),
             lambda x, d=d, k=keepdim: np.mean(x, axis=d, keepdims=k))
        case(f"var {tag}", lambda x, d=d, k=keepdim: x.var(dim=d, keepdim=k), ((2, 3, 4),),
             lambda x, d=d, k=keepdim: np.var(x, axis=d, keepdims=k, ddof=1))
case("sum positional dim", lambda x: x.sum(1), ((3, 4),), lambda x: x.sum(1))
case("gv.sum", lambda x: gv.sum(x, dim=0), ((3, 4),), lambda x: x.sum(0))
case("gv.mean", lambda x: gv.mean(x), ((3, 4),), np.mean)
case("var biased", lambda x: x.var(unbiased=False), ((3, 4),), np.var)
case("var biased dim", lambda x: x.var(1, unbiased=False), ((3, 4),), lambda x: np.var(x, axis=1))
case("gv.var", lambda x: gv.var(x, 0), ((3, 4),), lambda x: np.var(x, axis=0, ddof=1))
case("std", lambda x: x.std(dim=0), ((3, 4),), lambda x: np.std(x, axis=0, ddof=1))
case("max whole", lambda x: x.max(), ((3, 4),), np.max)
case("min whole", lambda x: x.min(), ((3, 4),), np.min)
case("gv.max whole", lambda x: gv.max(x), ((2, 3, 4),), np.max)
for dim in (0, 1, 2, -1):
    for keepdim in (False, True):
        tag = f"dim={dim} keepdim={keepdim}"
        case(f"max {tag}", lambda x, d=dim, k=keepdim: x.max(dim=d, keepdim=k), ((2, 3, 4),),
             lambda x, d=dim, k=keepdim: np.max(x, axis=d, keepdims=k))
        case(f"min {tag}", lambda x, d=dim, k=keepdim: x.min(d, keepdim=k), ((2, 3, 4),),
             lambda x, d=dim, k=keepdim: np.min(x, axis=d, keepdims=k))
case("max values attribute", lambda x: x.max(1).values * 2, ((3, 4),), lambda x: x.max(1) * 2)
case("gv.min dim", lambda x: gv.min(x, 0)[0], ((3, 4),), lambda x: x.min(0))
for dim in (0, 1, -1):
    case(f"softmax dim={dim}", lambda x, d=dim: x.softmax(d), ((3, 4),), lambda x, d=dim: _np_softmax(x, d))
    case(f"log_softmax dim={dim}", lambda x, d=dim: x.log_softmax(dim=d), ((3, 4),),
         lambda x, d=dim: np.log(_np_softmax(x, d)))
case("gv.softmax 3-D", lambda x: gv.softmax(x, dim=1), ((2, 3, 4),), lambda x: _np_softmax(x, 1))
case("gv.log_softmax 3-D", lambda x: gv.log_softmax(x, dim=-1), ((2, 3, 4),),
     lambda x: np.log(_np_softmax(x, -1)))
case("softmax large logits", lambda x: (x * 50).softmax(-1), ((3, 4),), lambda x: _np_softmax(x * 50, -1),
     eps=1e-7)

# ----- shape ops and views -----------------------------------------------------------------------------------
case("reshape", lambda x: x.reshape(4, 6), ((2, 3, 4),), lambda x: x.reshape(4, 6))
case("reshape tuple -1", lambda x: x.reshape((-1, 2)), ((2, 3, 4),), lambda x: x.reshape(-1, 2))
case("gv.reshape", lambda x: gv.reshape(x, (6, 4)), ((2, 3, 4),), lambda x: x.reshape(6, 4))
case("view", lambda x: x.view(3, 8), ((2, 3, 4),), lambda x: x.reshape(3, 8))
case("view -1", lambda x: x.view(-1), ((2, 3, 4),), lambda x: x.reshape(-1))
case("view_as", lambda x, y: x.view_as(y) * y, ((2, 6), (3, 4)), lambda x, y: x.reshape(3, 4) * y)
case("reshape of transpose (copy)", lambda x: x.t().reshape(-1), ((3, 4),), lambda x: x.T.reshape(-1))
case("flatten", lambda x: x.flatten(), ((2, 3, 4),), lambda x: x.reshape(-1))
case("flatten start_dim", lambda x: x.flatten(1), ((2, 3, 4),), lambda x: x.reshape(2, 12))
case("flatten end_dim", lambda x: gv.flatten(x, 0, 1), ((2, 3, 4),), lambda x: x.reshape(6, 4))
case("transpose", lambda x: x.transpose(0, 2), ((2, 3, 4),), lambda x: x.transpose(2, 1, 0))
case("transpose negative", lambda x: gv.transpose(x, -1, -2), ((2, 3, 4),), lambda x: x.swapaxes(-1, -2))
case("t", lambda x: x.t(), ((3, 4),), lambda x: x.T)
case("t 1-D", lambda x: gv.t(x) * 1, ((3,),), lambda x: x)
case("T", lambda x: x.T, ((2, 3, 4),), lambda x: x.T)
case("permute", lambda x: x.permute(2, 0, 1), ((2, 3, 4),), lambda x: x.transpose(2, 0, 1))
case("permute list", lambda x: x.permute([1, 2, 0]), ((2, 3, 4),), lambda x: x.transpose(1, 2, 0))
case("gv.permute", lambda x: gv.permute(x, (0, 2, 1)), ((2, 3, 4),), lambda x: x.transpose(0, 2, 1))
case("squeeze all", lambda x: x.squeeze(), ((1, 3, 1, 4),), lambda x: x.reshape(3, 4))
case("squeeze dim", lambda x: x.squeeze(2), ((1, 3, 1, 4),), lambda x: x.reshape(1, 3, 4))
case("squeeze non-1 dim", lambda x: x.squeeze(1), ((1, 3, 1, 4),), lambda x: x)
case("unsqueeze", lambda x: x.unsqueeze(1), ((3, 4),), lambda x: x[:, None])
case("unsqueeze -1", lambda x: gv.unsqueeze(x, -1), ((3, 4),), lambda x: x[..., None])
case("expand", lambda x: x.expand(2, 3, 4), ((3, 1),), lambda x: np.broadcast_to(x, (2, 3, 4)))
case("expand -1", lambda x: x.expand(-1, 5), ((3, 1),), lambda x: np.broadcast_to(x, (3, 5)))
case("expand_as", lambda x, y: x.expand_as(y) * y, ((1, 4), (3, 4)), lambda x, y: x * y)
case("clone", lambda x: x.clone(), ((3, 4),), lambda x: x)
case("gv.clone", lambda x: gv.clone(x) * 2, ((3, 4),), lambda x: x * 2)

# ----- indexing: basic (views), advanced (copies, repeated indices add up) -----------------------------------
case("getitem int", lambda x: x[1], ((3, 4),), lambda x: x[1])
case("getitem negative int", lambda x: x[-1, 2], ((3, 4),), lambda x: x[-1, 2])
case("getitem slice", lambda x: x[:, 1:3], ((3, 4),), lambda x: x[:, 1:3])
case("getitem step", lambda x: x[..., ::2], ((2, 3, 4),), lambda x: x[..., ::2])
case("getitem None", lambda x: x[None, 1], ((3, 4),), lambda x: x[None, 1])
case("getitem list repeated", lambda x: x[[0, 2, 0, 0]], ((3, 4),), lambda x: x[[0, 2, 0, 0]])
case("getitem long Variable", lambda x: x[gv.tensor([1, 1, 2])], ((3, 4),), lambda x: x[[1, 1, 2]])
case("getitem 2-D index Variable", lambda x: x[gv.tensor(_IDX_2D)], ((3, 4),), lambda x: x[_IDX_2D])
case("getitem list on dim 1", lambda x: x[:, [0, 3, 3]], ((3, 4),), lambda x: x[:, [0, 3, 3]])
case("getitem two lists", lambda x: x[[0, 1, 1], [2, 2, 2]], ((3, 4),), lambda x: x[[0, 1, 1], [2, 2, 2]])
case("getitem bool mask Variable", lambda x: x[gv.tensor(_MASK)], ((3, 4),), lambda x: x[_MASK])
case("getitem comparison mask", lambda x: x[x > 0], ((3, 4),), lambda x: x[x > 0])
case("getitem mask on rows", lambda x: x[gv.tensor([True, False, True])], ((3, 4),), lambda x: x[[0, 2]])
case("getitem int then list", lambda x: x[1, [0, 0, 2]], ((2, 3, 4),), lambda x: x[1, [0, 0, 2]])
case("getitem argmax", lambda x: x[gv.arange(3), x.argmax(1)], ((3, 4),), lambda x: x.max(1))

# ----- joining and selecting ------------------------------------------------------------------------------
for dim in (0, 1, -1):
    case(f"cat dim={dim}", lambda a, b, c, d=dim: gv.cat([a, b, c], dim=d), ((2, 3, 2), (2, 3, 2), (2, 3, 2)),
         lambda a, b, c, d=dim: np.concatenate([a, b, c], axis=d))
    case(f"stack dim={dim}", lambda a, b, d=dim: gv.stack([a, b], dim=d), ((3, 4), (3, 4)),
         lambda a, b, d=dim: np.stack([a, b], axis=d))
case("cat uneven", lambda a, b: gv.cat((a, b), 1), ((2, 1), (2, 3)), lambda a, b: np.concatenate([a, b], 1))
case("cat with constant", lambda a: gv.cat([a, gv.zeros(2, 3, dtype=gv.float64)]), ((1, 3),),
     lambda a: np.concatenate([a, np.zeros((2, 3))]))
case("concat", lambda a, b: gv.concat([a, b], dim=0), ((2, 3), (1, 3)), lambda a, b: np.concatenate([a, b]))
case("stack same input", lambda a: gv.stack([a, a * 2]), ((3,),), lambda a: np.stack([a, 2 * a]))
case("where", lambda a, b: gv.where(gv.tensor(_COND), a, b), ((3, 4), (3, 4)), lambda a, b: np.where(_COND, a, b))
case("where broadcast", lambda a, b: gv.where(gv.tensor(_COND), a, b), ((4,), (3, 1)),
     lambda a, b: np.where(_COND, a, b))
case("where from comparison", lambda a, b: gv.where(a > b, a, b), ((3, 4), (3, 4)), np.maximum)
case("where scalar branch", lambda a: gv.where(a > 0, a, 0.0), ((3, 4),), lambda a: np.where(a > 0, a, 0.0))

# ----- casts (finite differences through float32 need a wider step) ---------------------------------------
case("cast to float32 and back", lambda x: (x.float() * 3).double(), ((3, 4),), None, eps=1e-2, atol=1e-4)
case("to(float32).to(float64)", lambda x: x.to(gv.float32).to(gv.float64) ** 2, ((3,),), None,
     eps=1e-2, atol=1e-2, rtol=1e-2)
case("double is identity", lambda x: x.double() * 2, ((3,),), lambda x: 2 * x)


# ----- in-place ops on non-leaves (gradients through the rewritten graph) ---------------------------------------
def _inplace(fn):
    def run(*xs):
        y = xs[0].clone()
        return fn(y, *xs[1:])
    return run


def _setitem(y, v):
    y[1] = v
    return y


def _setitem_mask(y):
    y[y < 0] = 0.0
    return y * 2


def _iadd(y, b):
    y += b
    return y


def _imul(y, b):
    y *= b
    return y


def _isub_idiv(y, b):
    y -= b
    y /= 2.0
    return y


def _view_add(y, b):
    y[:, 1].add_(b)
    return y


def _view_mul_saved(y, b):
    z = y * 1  # consumes y before the write
    y.t()[0].mul_(b)
    return y + z


def _transpose_copy(y, b):
    y.transpose(0, 1).copy_(b)
    return y


case("add_", _inplace(lambda y, b: y.add_(b)), ((3, 4), (4,)), np.add)
case("add_ alpha", _inplace(lambda y, b: y.add_(b, alpha=-2.0)), ((3, 4), (3, 4)), lambda a, b: a - 2 * b)
case("sub_", _inplace(lambda y, b: y.sub_(b)), ((3, 4), (3, 1)), np.subtract)
case("mul_", _inplace(lambda y, b: y.mul_(b)), ((3, 4), (4,)), np.multiply)
case("div_", _inplace(lambda y, b: y.div_(b)), ((3, 4), (3, 4)), np.divide, domain="nonzero")
case("pow_", _inplace(lambda y: y.pow_(2)), ((3, 4),), np.square)
case("pow_ tensor", _inplace(lambda y, b: y.pow_(b)), ((3, 4), (4,)), np.power, domain="positive")
case("exp_", _inplace(lambda y: y.exp_()), ((3, 4),), np.exp)
case("exp_ then use", _inplace(lambda y: y.exp_() * 2), ((3, 4),), lambda x: np.exp(x) * 2)
case("clamp_", _inplace(lambda y: y.clamp_(-0.5, 0.5)), ((3, 4),), lambda x: np.clip(x, -0.5, 0.5))
case("relu_", _inplace(lambda y: y.relu_()), ((3, 4),), lambda x: np.maximum(x, 0), domain="nonzero")
case("zero_", _inplace(lambda y, b: y.zero_() + b), ((3, 4), (3, 4)), lambda a, b: b)
case("fill_", _inplace(lambda y, b: y.fill_(2.0) * b), ((3, 4), (3, 4)), lambda a, b: 2 * b)
case("copy_", _inplace(lambda y, b: y.copy_(b) * y), ((3, 4), (4,)), lambda a, b: np.broadcast_to(b * b, a.shape))
case("setitem Variable", _inplace(_setitem), ((3, 4), (4,)), lambda a, v: np.concatenate([a[:1], v[None], a[2:]]))
case("setitem mask constant", _inplace(_setitem_mask), ((3, 4),), lambda a: np.where(a < 0, 0, a) * 2)
case("iadd", _inplace(_iadd), ((3, 4), (4,)), np.add)
case("imul", _inplace(_imul), ((3, 4), (3, 1)), np.multiply)
case("isub idiv", _inplace(_isub_idiv), ((3, 4), ()), lambda a, b: (a - b) / 2)
case("add_ through view", _inplace(_view_add), ((3, 4), (3,)),
     lambda a, b: a + np.stack([np.zeros(3), b, np.zeros(3), np.zeros(3)], axis=1))
case("mul_ through transposed view", _inplace(_view_mul_saved), ((3, 4), ()),
     lambda a, b: np.concatenate([a[:, :1] * b, a[:, 1:]], axis=1) + a)
case("copy_ through transpose", _inplace(_transpose_copy), ((3, 4), (4, 3)), lambda a, b: b.T)


# ----- the pointwise math family (issue 8, opsa) -------------------------------------------------------------
def _unit(x):
    """Map any real into (-0.9, 0.9): the domain of asin, acos, atanh, erfinv."""
    return x.tanh() * 0.9


def _prob(x):
    """Map any real into (0.05, 0.95): logit's domain."""
    return x.sigmoid() * 0.9 + 0.05


def _np_prob(x):
    return 1 / (1 + np.exp(-x)) * 0.9 + 0.05


case("tan", lambda x: x.tan(), ((3, 4),), np.tan)
case("gv.tan_ on a non-leaf", _inplace(lambda y: y.tan_()), ((3, 4),), np.tan)
case("asin", lambda x: _unit(x).asin(), ((3, 4),), lambda x: np.arcsin(np.tanh(x) * 0.9))
case("acos", lambda x: gv.acos(_unit(x)), ((3, 4),), lambda x: np.arccos(np.tanh(x) * 0.9))
case("atan", lambda x: x.atan(), ((3, 4),), np.arctan)
case("arctan alias", lambda x: gv.arctan(x), ((3, 4),), np.arctan)
case("sinh", lambda x: x.sinh(), ((3, 4),), np.sinh)
case("cosh", lambda x: gv.cosh(x), ((3, 4),), np.cosh)
case("asinh", lambda x: x.asinh(), ((3, 4),), np.arcsinh)
case("acosh", lambda x: (x + 1).acosh(), ((3, 4),), lambda x: np.arccosh(x + 1), domain="positive")
case("atanh", lambda x: _unit(x).atanh(), ((3, 4),), lambda x: np.arctanh(np.tanh(x) * 0.9))
case("sin_", _inplace(lambda y: y.sin_()), ((3, 4),), np.sin)
case("cos_", _inplace(lambda y: y.cos_()), ((3, 4),), np.cos)
case("tanh_", _inplace(lambda y: y.tanh_()), ((3, 4),), np.tanh)
case("sigmoid_", _inplace(lambda y: y.sigmoid_()), ((3, 4),), lambda x: 1 / (1 + np.exp(-x)))
case("exp2", lambda x: x.exp2(), ((3, 4),), np.exp2)
case("expm1", lambda x: gv.expm1(x), ((3, 4),), np.expm1)
case("expm1_", _inplace(lambda y: y.expm1_()), ((3, 4),), np.expm1)
case("log2", lambda x: x.log2(), ((3, 4),), np.log2, domain="positive")
case("log10", lambda x: gv.log10(x), ((3, 4),), np.log10, domain="positive")
case("log1p", lambda x: x.log1p(), ((3, 4),), np.log1p, domain="positive")
case("log_", _inplace(lambda y: y.log_()), ((3, 4),), np.log, domain="positive")
case("sqrt_", _inplace(lambda y: y.sqrt_()), ((3, 4),), np.sqrt, domain="positive")
case("rsqrt", lambda x: x.rsqrt(), ((3, 4),), lambda x: 1 / np.sqrt(x), domain="positive")
case("rsqrt_", _inplace(lambda y: y.rsqrt_()), ((3, 4),), lambda x: 1 / np.sqrt(x), domain="positive")
case("square", lambda x: gv.square(x), ((3, 4),), np.square)
case("square_", _inplace(lambda y: y.square_()), ((3, 4),), np.square)
case("reciprocal", lambda x: x.reciprocal(), ((3, 4),), np.reciprocal, domain="nonzero")
case("reciprocal_", _inplace(lambda y: y.reciprocal_()), ((3, 4),), np.reciprocal, domain="nonzero")
case("abs_", _inplace(lambda y: y.abs_()), ((3, 4),), np.abs, domain="nonzero")
case("neg_", _inplace(lambda y: y.neg_()), ((3, 4),), np.negative)
case("frac", lambda x: (x * 3).frac(), ((3, 4),), lambda x: np.modf(x * 3)[0], domain="nonzero")
case("floor has zero gradient", lambda x: x.floor() + x, ((3, 4),), lambda x: np.floor(x) + x)
case("ceil has zero gradient", lambda x: gv.ceil(x) * x, ((3, 4),), lambda x: np.ceil(x) * x)
case("round has zero gradient", lambda x: x.round(decimals=1) + x, ((3, 4),), lambda x: np.round(x, 1) + x)
case("trunc has zero gradient", lambda x: x.trunc() + x, ((3, 4),), lambda x: np.trunc(x) + x)
case("sign has zero gradient", lambda x: x.sign() * x, ((3, 4),), np.abs, domain="nonzero")
case("logit", lambda x: _prob(x).logit(), ((3, 4),), lambda x: np.log(_np_prob(x) / (1 - _np_prob(x))))
case("logit eps", lambda x: gv.logit(_prob(x), eps=0.2), ((3, 4),),
     lambda x: np.log(np.clip(_np_prob(x), 0.2, 0.8) / (1 - np.clip(_np_prob(x), 0.2, 0.8))), domain="nonzero")
case("erf", lambda x: x.erf(), ((3, 4),), lambda x: np.vectorize(math.erf)(x))
case("erfc", lambda x: gv.erfc(x * 2), ((3, 4),), lambda x: np.vectorize(math.erfc)(x * 2))
case("erfinv", lambda x: _unit(x).erfinv(), ((3, 4),))
case("erf_", _inplace(lambda y: y.erf_()), ((3, 4),), lambda x: np.vectorize(math.erf)(x))
for sa, sb in BROADCAST_PAIRS[:4]:
    tag = f"{list(sa)}x{list(sb)}"
    case(f"atan2 {tag}", lambda a, b: gv.atan2(a, b), (sa, sb), np.arctan2, domain="nonzero")
    case(f"hypot {tag}", lambda a, b: a.hypot(b), (sa, sb), np.hypot, domain="nonzero")
    case(f"fmod {tag}", lambda a, b: gv.fmod(a * 3, b), (sa, sb), lambda a, b: np.fmod(a * 3, b), domain="nonzero")
    case(f"remainder {tag}", lambda a, b: (a * 3) % b, (sa, sb), lambda a, b: np.remainder(a * 3, b),
         domain="nonzero")
    case(f"lerp tensor weight {tag}", lambda a, b: gv.lerp(a, b, b.sigmoid()), (sa, sb),
         lambda a, b: a + (b - a) / (1 + np.exp(-b)))
    case(f"where promotion {tag}", lambda a, b: gv.where(a > 0, a, b.double()), (sa, sb),
         lambda a, b: np.where(a > 0, a, b))
    case(f"clamp tensor bounds {tag}", lambda a, b: a.clamp(b - 0.5, b + 0.5), (sa, sb),
         lambda a, b: np.clip(a, b - 0.5, b + 0.5), domain="nonzero")
case("lerp scalar weight", lambda a, b: a.lerp(b, 0.3), ((3, 4), (4,)), lambda a, b: a + 0.3 * (b - a))
case("lerp_ scalar weight", _inplace(lambda y, b: y.lerp_(b, 0.7)), ((3, 4), (4,)), lambda a, b: a + 0.7 * (b - a))
case("atan2_", _inplace(lambda y, b: y.atan2_(b)), ((3, 4), (4,)), np.arctan2, domain="nonzero")
case("clamp min tensor only", lambda a, b: gv.clamp(a, min=b), ((3, 4), (4,)), np.maximum, domain="nonzero")
case("clamp max tensor only", lambda a, b: a.clamp(max=b), ((3, 4), (3, 1)), np.minimum, domain="nonzero")
case("clamp_ tensor bounds", _inplace(lambda y, b: y.clamp_(b, b + 1)), ((3, 4), (4,)),
     lambda a, b: np.clip(a, b, b + 1), domain="nonzero")
case("clamp_min", lambda x: gv.clamp_min(x, 0.2), ((3, 4),), lambda x: np.maximum(x, 0.2), domain="nonzero")
case("clamp_max", lambda x: x.clamp_max(0.2), ((3, 4),), lambda x: np.minimum(x, 0.2), domain="nonzero")
case("masked_fill", lambda x: x.masked_fill(gv.tensor(_MASK), 0.5), ((3, 4),), lambda x: np.where(_MASK, 0.5, x))
case("masked_fill 0-dim value", lambda x, v: gv.masked_fill(x, gv.tensor(_MASK[0]), v), ((3, 4), ()),
     lambda x, v: np.where(_MASK[0], v, x))
case("masked_fill_", _inplace(lambda y, v: y.masked_fill_(gv.tensor(_MASK), v)), ((3, 4), ()),
     lambda x, v: np.where(_MASK, v, x))
case("pow int64 exponent tensor", lambda x: x ** gv.tensor([1, 2, 3, 0]), ((3, 4),),
     lambda x: x ** np.array([1, 2, 3, 0]))

# ----- opsb: views, rearrangements, gather/scatter, sorting, reductions, products --------------------------------
_GATHER_IDX = np.array([[0, 3, 3], [1, 0, 2], [2, 2, 1]])
_SCATTER_IDX = np.array([[0, 3], [1, 0], [2, 1]])  # no repeats along dim 1: scatter's result is well defined
_SELECT_IDX = np.array([2, 0, 2, 3])


def _np_gather(x, idx, dim):
    return np.take_along_axis(x[tuple(slice(n) for n in idx.shape)] if dim == 1 else x, idx, axis=dim)


def _np_scatter_add(x, idx, src):
    out = x.copy()
    for i in range(idx.shape[0]):
        for j in range(idx.shape[1]):
            out[i, idx[i, j]] += src[i, j]
    return out


def _np_scatter(x, idx, src):
    out = x.copy()
    np.put_along_axis(out, idx, src, axis=1)
    return out


def _np_cumprod_zero(x):
    y = x.copy()
    y[1, 1] = 0.0
    y[2, 0] = 0.0
    return np.cumprod(y, axis=1)


def _with_zeros(x):
    """x with exact zeros at two places, to check the zero-aware backward of prod/cumprod."""
    mask = np.ones(x.shape)
    mask[1, 1] = 0.0
    mask[2, 0] = 0.0
    return x * gv.tensor(mask, dtype=gv.float64)


case("narrow", lambda x: x.narrow(1, 1, 2), ((3, 4),), lambda x: x[:, 1:3])
case("gv.narrow negative start", lambda x: gv.narrow(x, -1, -2, 2), ((2, 3, 4),), lambda x: x[..., 2:4])
case("split int", lambda x: x.split(3, 1)[1], ((3, 5),), lambda x: x[:, 3:5])
case("split sizes", lambda x: gv.split(x, [1, 3], dim=1)[1] * 2, ((3, 4),), lambda x: x[:, 1:4] * 2)
case("split pieces combined", lambda x: sum(p.sum(0) * (i + 1) for i, p in enumerate(x.split(2))), ((5, 2),),
     lambda x: x[0:2].sum(0) + 2 * x[2:4].sum(0) + 3 * x[4:5].sum(0))
case("chunk", lambda x: x.chunk(3, dim=-1)[2], ((2, 7),), lambda x: x[:, 6:7])
case("gv.chunk uneven", lambda x: gv.chunk(x, 2)[0], ((5, 2),), lambda x: x[:3])
case("unbind", lambda x: x.unbind(1)[2], ((3, 4),), lambda x: x[:, 2])
case("gv.unbind all used", lambda x: gv.stack(gv.unbind(x)[::-1]), ((3, 4),), lambda x: x[::-1])
case("movedim", lambda x: x.movedim(0, 2), ((2, 3, 4),), lambda x: np.moveaxis(x, 0, 2))
case("gv.movedim pairs", lambda x: gv.movedim(x, (0, 1), (2, 0)), ((2, 3, 4),),
     lambda x: np.moveaxis(x, (0, 1), (2, 0)))
case("moveaxis", lambda x: x.moveaxis(-1, 0), ((2, 3, 4),), lambda x: np.moveaxis(x, -1, 0))
case("unflatten", lambda x: x.unflatten(1, (2, -1)), ((3, 6),), lambda x: x.reshape(3, 2, 3))
case("diagonal", lambda x: x.diagonal(), ((3, 4),), lambda x: np.diagonal(x))
case("diagonal offset dims", lambda x: gv.diagonal(x, 1, 0, 2), ((3, 2, 4),),
     lambda x: np.diagonal(x, 1, 0, 2))
case("diagonal negative offset", lambda x: x.diagonal(-1), ((4, 3),), lambda x: np.diagonal(x, -1))
case("repeat", lambda x: x.repeat(2, 3), ((2, 3),), lambda x: np.tile(x, (2, 3)))
case("repeat new dims", lambda x: x.repeat(2, 1, 2), ((2, 3),), lambda x: np.tile(x, (2, 1, 2)))
case("tile", lambda x: gv.tile(x, (2,)), ((2, 3),), lambda x: np.tile(x, (1, 2)))
case("repeat_interleave int", lambda x: x.repeat_interleave(2, dim=1), ((2, 3),),
     lambda x: np.repeat(x, 2, axis=1))
case("repeat_interleave flat", lambda x: gv.repeat_interleave(x, 3), ((2, 2),), lambda x: np.repeat(x, 3))
case("repeat_interleave counts", lambda x: x.repeat_interleave(gv.tensor([2, 0, 1]), dim=0), ((3, 2),),
     lambda x: np.repeat(x, [2, 0, 1], axis=0))
case("flip", lambda x: x.flip(0), ((3, 4),), lambda x: x[::-1])
case("gv.flip dims", lambda x: gv.flip(x, (0, 2)), ((2, 3, 4),), lambda x: x[::-1, :, ::-1])
case("roll flat", lambda x: x.roll(2), ((3, 4),), lambda x: np.roll(x, 2))
case("gv.roll dims", lambda x: gv.roll(x, (1, -1), (0, 1)), ((3, 4),), lambda x: np.roll(x, (1, -1), (0, 1)))
case("gather dim 1", lambda x: x.gather(1, gv.tensor(_GATHER_IDX)), ((3, 4),),
     lambda x: np.take_along_axis(x[:, :4], _GATHER_IDX, 1))
case("gv.gather dim 0 smaller index", lambda x: gv.gather(x, 0, gv.tensor([[0, 2], [2, 2]])), ((3, 4),),
     lambda x: np.take_along_axis(x[:, :2], np.array([[0, 2], [2, 2]]), 0))
case("scatter src", lambda x, s: x.scatter(1, gv.tensor(_SCATTER_IDX), s), ((3, 4), (3, 2)),
     lambda x, s: _np_scatter(x, _SCATTER_IDX, s))
case("scatter value", lambda x: gv.scatter(x, 1, gv.tensor(_SCATTER_IDX), value=2.5), ((3, 4),),
     lambda x: _np_scatter(x, _SCATTER_IDX, np.full((3, 2), 2.5)))
case("scatter src larger than index", lambda x, s: x.scatter(1, gv.tensor(_SCATTER_IDX[:, :1]), s),
     ((3, 4), (3, 3)), lambda x, s: _np_scatter(x, _SCATTER_IDX[:, :1], s[:, :1]))
case("scatter_add repeats", lambda x, s: x.scatter_add(1, gv.tensor(_GATHER_IDX), s), ((3, 4), (3, 3)),
     lambda x, s: _np_scatter_add(x, _GATHER_IDX, s))
case("gv.scatter_add", lambda x, s: gv.scatter_add(x, 1, gv.tensor(_GATHER_IDX), s), ((3, 4), (3, 3)),
     lambda x, s: _np_scatter_add(x, _GATHER_IDX, s))
case("index_select repeats", lambda x: x.index_select(1, gv.tensor(_SELECT_IDX)), ((3, 4),),
     lambda x: x[:, _SELECT_IDX])
case("gv.index_select dim 0", lambda x: gv.index_select(x, 0, gv.tensor([1, 1])), ((3, 4),), lambda x: x[[1, 1]])
case("index_add repeats alpha", lambda x, s: x.index_add(1, gv.tensor(_SELECT_IDX), s, alpha=2.0),
     ((3, 4), (3, 4)), lambda x, s: x + 2 * np.stack([s[:, 1], np.zeros(3), s[:, 0] + s[:, 2], s[:, 3]], axis=1))
case("take_along_dim", lambda x: gv.take_along_dim(x, gv.tensor(_GATHER_IDX[:, :1]), 1), ((3, 4),),
     lambda x: np.take_along_axis(x, _GATHER_IDX[:, :1], 1))
case("take_along_dim broadcast", lambda x: x.take_along_dim(gv.tensor([[0, 2]]), dim=1), ((3, 4),),
     lambda x: x[:, [0, 2]])
case("take_along_dim flat", lambda x: gv.take_along_dim(x, gv.tensor([5, 0, 5])), ((3, 4),),
     lambda x: x.reshape(-1)[[5, 0, 5]])
case("index_add_ on clone", _inplace(lambda y, s: y.index_add_(0, gv.tensor([2, 0, 2]), s)), ((3, 4), (3, 4)),
     lambda x, s: x + np.stack([s[1], np.zeros(4), s[0] + s[2]]))
case("scatter_ on clone", _inplace(lambda y, s: y.scatter_(1, gv.tensor(_SCATTER_IDX), s)), ((3, 4), (3, 2)),
     lambda x, s: _np_scatter(x, _SCATTER_IDX, s))
case("scatter_add_ on clone", _inplace(lambda y, s: y.scatter_add_(1, gv.tensor(_GATHER_IDX), s)),
     ((3, 4), (3, 3)), lambda x, s: _np_scatter_add(x, _GATHER_IDX, s))
for dim in (0, 1, -1):
    case(f"sort dim={dim}", lambda x, d=dim: x.sort(d).values, ((3, 4),), lambda x, d=dim: np.sort(x, axis=d))
    case(f"sort descending dim={dim}", lambda x, d=dim: gv.sort(x, d, descending=True)[0], ((3, 4),),
         lambda x, d=dim: -np.sort(-x, axis=d))
case("topk", lambda x: x.topk(2).values, ((3, 4),), lambda x: -np.sort(-x, axis=1)[:, :2])
case("gv.topk smallest dim 0", lambda x: gv.topk(x, 2, dim=0, largest=False)[0], ((3, 4),),
     lambda x: np.sort(x, axis=0)[:2])
for dim in (0, 1, -1):
    case(f"cumsum dim={dim}", lambda x, d=dim: x.cumsum(d), ((3, 4),), lambda x, d=dim: np.cumsum(x, axis=d))
    case(f"cumprod dim={dim}", lambda x, d=dim: x.cumprod(d), ((3, 4),), lambda x, d=dim: np.cumprod(x, axis=d))
case("cumprod with zeros", lambda x: _with_zeros(x).cumprod(1), ((3, 4),), _np_cumprod_zero)
case("cumprod 3-D", lambda x: gv.cumprod(x, 1), ((2, 3, 2),), lambda x: np.cumprod(x, axis=1))
case("gv.cumsum", lambda x: gv.cumsum(x, 0), ((3, 4),), lambda x: np.cumsum(x, axis=0))
case("cumsum_ on clone", _inplace(lambda y: y.cumsum_(1)), ((3, 4),), lambda x: np.cumsum(x, axis=1))
case("prod whole", lambda x: x.prod(), ((3, 4),), np.prod)
for dim in (0, 1):
    for keepdim in (False, True):
        case(f"prod dim={dim} keepdim={keepdim}", lambda x, d=dim, k=keepdim: x.prod(d, keepdim=k), ((3, 4),),
             lambda x, d=dim, k=keepdim: np.prod(x, axis=d, keepdims=k))
case("prod with zeros", lambda x: _with_zeros(x).prod(1), ((3, 4),),
     lambda x: np.prod(np.where(np.isin(np.arange(12).reshape(3, 4), [5, 8]), 0, x), axis=1))
case("prod two zeros in a row", lambda x: (x * gv.tensor([0.0, 1.0, 0.0], dtype=gv.float64)).prod(), ((3,),),
     lambda x: np.float64(0.0))
case("gv.prod", lambda x: gv.prod(x, -1), ((2, 3),), lambda x: np.prod(x, axis=-1))
for dim in (0, 1, (0, 1)):
    case(f"logsumexp dim={dim}", lambda x, d=dim: x.logsumexp(d), ((3, 4),),
         lambda x, d=dim: np.log(np.sum(np.exp(x), axis=d)))
case("gv.logsumexp keepdim large", lambda x: gv.logsumexp(x * 100, 1, keepdim=True), ((3, 4),),
     lambda x: (100 * x).max(1, keepdims=True) + np.log(np.exp(100 * x - (100 * x).max(1, keepdims=True))
                                                           .sum(1, keepdims=True)), eps=1e-8)
for p, ref in [(1, lambda x, d: np.sum(np.abs(x), axis=d)), (2, lambda x, d: np.sqrt(np.sum(x * x, axis=d))),
               ("fro", lambda x, d: np.sqrt(np.sum(x * x, axis=d))), (3, lambda x, d: np.sum(np.abs(x) ** 3, axis=d)
                                                                      ** (1 / 3)),
               (0.5, lambda x, d: np.sum(np.abs(x) ** 0.5, axis=d) ** 2),
               (float("inf"), lambda x, d: np.max(np.abs(x), axis=d)),
               (float("-inf"), lambda x, d: np.min(np.abs(x), axis=d))]:
    case(f"norm p={p}", lambda x, p=p: x.norm(p), ((3, 4),), lambda x, r=ref: r(x, None), domain="nonzero")
    case(f"norm p={p} dim=1", lambda x, p=p: gv.norm(x, p, dim=1), ((3, 4),), lambda x, r=ref: r(x, 1),
         domain="nonzero")
case("norm fro dims keepdim", lambda x: x.norm("fro", dim=(1, 2), keepdim=True), ((2, 3, 4),),
     lambda x: np.sqrt(np.sum(x * x, axis=(1, 2), keepdims=True)))
for correction in (0, 1, 2):
    case(f"var correction={correction}", lambda x, c=correction: x.var(1, correction=c), ((3, 5),),
         lambda x, c=correction: np.var(x, axis=1, ddof=c))
    case(f"std correction={correction}", lambda x, c=correction: gv.std(x, dim=0, correction=c), ((4, 3),),
         lambda x, c=correction: np.std(x, axis=0, ddof=c))
case("std whole keepdim", lambda x: x.std(keepdim=True), ((3, 4),), lambda x: np.std(x, ddof=1, keepdims=True))
case("std unbiased=False", lambda x: x.std(1, unbiased=False), ((3, 4),), lambda x: np.std(x, axis=1))
case("amax whole", lambda x: x.amax(), ((3, 4),), np.max)
case("amax dims", lambda x: x.amax((0, 2)), ((2, 3, 4),), lambda x: np.max(x, axis=(0, 2)))
case("amin dim keepdim", lambda x: gv.amin(x, 1, keepdim=True), ((3, 4),), lambda x: np.min(x, 1, keepdims=True))
case("gv.amax", lambda x: gv.amax(x, -1), ((3, 4),), lambda x: np.max(x, axis=-1))

# ----- opsb: products and triangles --------------------------------------------------------------------------------
case("bmm", lambda a, b: a.bmm(b), ((2, 3, 4), (2, 4, 5)), np.matmul)
case("gv.bmm", lambda a, b: gv.bmm(a, b), ((3, 1, 2), (3, 2, 2)), np.matmul)
case("addmm", lambda c, a, b: gv.addmm(c, a, b), ((2, 4), (2, 3), (3, 4)), lambda c, a, b: c + a @ b)
case("addmm broadcast beta alpha", lambda c, a, b: c.addmm(a, b, beta=0.5, alpha=-2.0), ((4,), (2, 3), (3, 4)),
     lambda c, a, b: 0.5 * c - 2 * a @ b)
case("addmm_ on clone", _inplace(lambda c, a, b: c.addmm_(a, b, alpha=3.0)), ((2, 4), (2, 3), (3, 4)),
     lambda c, a, b: c + 3 * a @ b)
case("baddbmm", lambda c, a, b: gv.baddbmm(c, a, b, beta=2.0), ((2, 3, 5), (2, 3, 4), (2, 4, 5)),
     lambda c, a, b: 2 * c + a @ b)
case("baddbmm broadcast input", lambda c, a, b: c.baddbmm(a, b), ((5,), (2, 3, 4), (2, 4, 5)),
     lambda c, a, b: c + a @ b)
case("dot", lambda a, b: a.dot(b), ((5,), (5,)), np.dot)
case("gv.dot same input", lambda a: gv.dot(a, a), ((4,),), lambda a: a @ a)
case("outer", lambda a, b: a.outer(b), ((3,), (4,)), np.outer)
case("gv.outer", lambda a, b: gv.outer(a, b), ((2,), (5,)), np.outer)
for eq, shapes in [("ij,jk->ik", ((2, 3), (3, 4))), ("ij,kj", ((2, 3), (4, 3))), ("bij,bjk->bik", ((2, 2, 3),
                   (2, 3, 4))), ("ii", ((3, 3),)), ("ii->i", ((3, 3),)), ("ij->", ((2, 3),)), ("ij->j", ((2, 3),)),
                   ("i,j->ij", ((2,), (3,))), ("...j,j->...", ((2, 3, 4), (4,))), ("i...->...", ((3, 2, 2),)),
                   ("ij,jk,kl->il", ((2, 3), (3, 4), (4, 2))), ("iij->ij", ((2, 2, 3),)), ("ij,ij->", ((2, 3),
                   (2, 3))), ("ji", ((2, 3),)), ("bn,anm,bm->ba", ((2, 3), (4, 3, 2), (2, 2)))]:
    case(f"einsum {eq}", lambda *xs, e=eq: gv.einsum(e, *xs), shapes, lambda *xs, e=eq: np.einsum(e, *xs))
case("einsum list operands", lambda a, b: gv.einsum("ij,jk", [a, b]), ((2, 3), (3, 2)), np.matmul)
case("einsum size-1 broadcast", lambda a, b: gv.einsum("ij,jk->ik", a, b), ((2, 1), (3, 4)),
     lambda a, b: a * b.sum(0))
for k in (0, 1, -1):
    case(f"tril k={k}", lambda x, k=k: x.tril(k), ((3, 4),), lambda x, k=k: np.tril(x, k))
    case(f"triu k={k}", lambda x, k=k: gv.triu(x, k), ((2, 3, 4),), lambda x, k=k: np.triu(x, k))
case("tril_ on clone", _inplace(lambda y: y.tril_()), ((3, 3),), np.tril)
case("triu_ on clone", _inplace(lambda y: y.triu_(1) * 2), ((3, 3),), lambda x: np.triu(x, 1) * 2)
case("diag of vector", lambda x: x.diag(), ((3,),), np.diag)
case("gv.diag of vector offset", lambda x: gv.diag(x, -1), ((3,),), lambda x: np.diag(x, -1))
case("diag of matrix", lambda x: gv.diag(x), ((3, 4),), np.diag)
case("diag of matrix offset", lambda x: x.diag(2), ((3, 4),), lambda x: np.diag(x, 2))
case("trace method", lambda x: x.trace(), ((3, 4),), np.trace)
# ----- breadth2: meshgrid (reshape + expand) -----------------------------------------------------------------
for _ix in ("ij", "xy"):
    case(f"meshgrid {_ix}", lambda a, b, c, ix=_ix: gv.stack(gv.meshgrid(a, b, c, indexing=ix)),
         ((2,), (3,), (4,)), lambda a, b, c, ix=_ix: np.stack(np.meshgrid(a, b, c, indexing=ix)))
