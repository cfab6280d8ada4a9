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
