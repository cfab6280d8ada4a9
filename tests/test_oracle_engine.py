"""PyTorch as the oracle: random programs run step by step in gradviz and in torch must agree on every value,
version counter, leaf-ness, gradient (1e-6, float64) and on every error (type and message prefix).

A program is drawn from a seeded generator: ops over a pool of Variables (a few leaves, a constant), including
views, indexing, reductions and in-place writes (directly and through views). Because gradviz mirrors PyTorch's
API, each step is one lambda applied to both libraries' values.
"""

import re
import warnings

import numpy as np
import pytest

import gradviz as gv

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.oracle

LEAF_SHAPES = [(3, 4), (4,), (3, 1), (4, 4)]
N_PROGRAMS = 160
N_STEPS = 14


def _broadcasts(a, b):
    try:
        np.broadcast_shapes(a, b)
    except ValueError:
        return False
    return True


def _prefix(message):
    """The part of an error message both libraries must share: up to the first colon, bracket or sentence end."""
    return re.split(r"[:(\[]|\.(?:\s|$)", str(message), maxsplit=1)[0].strip()


# ----- the op menu: each entry draws its parameters, then returns a lambda usable on gradviz and torch -----------
def _unary(rng, shapes):
    table = [
        lambda x: -x, lambda x: x.tanh().exp(), lambda x: x.sin(), lambda x: x.cos(), lambda x: x.tanh(),
        lambda x: x.sigmoid(), lambda x: x.relu(), lambda x: x.abs(), lambda x: x.clamp(-0.5, 0.8),
        lambda x: (x * x + 0.5).sqrt(), lambda x: (x * x + 1).log(), lambda x: x ** 2, lambda x: x.pow(3) / 3,
        lambda x: 2 ** x.tanh(), lambda x: x.clone(), lambda x: x * 1.5, lambda x: 0.5 - x,
        lambda x: 1.0 / (x * x + 1), lambda x: x.clamp(min=0.1), lambda x: x.double(),
    ]
    return table[rng.integers(len(table))], 1


def _binary(rng, shapes):
    table = [
        lambda a, b: a + b, lambda a, b: a - b, lambda a, b: a * b, lambda a, b: a / (b * b + 1),
        lambda a, b: (a * a + 1) ** b.tanh(), lambda a, b: a.add(b, alpha=0.5),
        lambda a, b: _lib(a).maximum(a, b), lambda a, b: _lib(a).minimum(b, a),
        lambda a, b: _lib(a).where(a > b, a, b),
    ]
    return table[rng.integers(len(table))], 2


def _lib(x):
    return gv if isinstance(x, gv.Tensor) else torch


def _reduction(rng, shapes):
    shape = shapes[0]
    if not shape or 0 in shape:
        return None
    nd = len(shape)
    d = int(rng.integers(-nd, nd))
    k = bool(rng.integers(2))
    options = [
        lambda x: x.sum(), lambda x: x.sum(d, keepdim=k), lambda x: x.mean(dim=d, keepdim=k), lambda x: x.mean(),
        lambda x: x.max(), lambda x: x.min(), lambda x: x.max(d, keepdim=k)[0], lambda x: x.min(dim=d).values,
        lambda x: x.softmax(d), lambda x: x.log_softmax(dim=d),
    ]
    if shape[d] > 1:
        options += [lambda x: x.var(d, keepdim=k), lambda x: x.var(dim=d, unbiased=False)]
    return options[rng.integers(len(options))], 1


def _shape_op(rng, shapes):
    shape = shapes[0]
    nd = len(shape)
    options = [lambda x: x.reshape(-1), lambda x: x.unsqueeze(0), lambda x: x.flatten()]
    if nd == 2:
        options += [lambda x: x.t(), lambda x: x.transpose(0, 1), lambda x: x.T, lambda x: x.permute(1, 0),
                    lambda x: x.unsqueeze(1).expand(shape[0], 2, shape[1]), lambda x: x.t().reshape(-1)]
    if 1 in shape:
        options += [lambda x: x.squeeze(), lambda x: x.squeeze(shape.index(1))]
    if nd <= 2 and _broadcasts(shape, (3, 4)) and shape != (3, 4):
        options.append(lambda x: x.expand(3, 4))
    if nd >= 1 and shape[0] % 2 == 0:
        options.append(lambda x: x.view(2, -1))
    return options[rng.integers(len(options))], 1


def _index(rng, shapes):
    shape = shapes[0]
    if not shape or shape[0] == 0:
        return None
    n = shape[0]
    i = int(rng.integers(-n, n))
    rows = [int(r) for r in rng.integers(0, n, size=4)]  # with repeats
    options = [
        lambda x: x[i], lambda x: x[1:], lambda x: x[::2], lambda x: x[rows],
        lambda x: x[_lib(x).tensor(rows)], lambda x: x[x > 0], lambda x: x[..., None],
    ]
    if len(shape) == 2:
        cols = [int(c) for c in rng.integers(0, shape[1], size=3)]
        options += [lambda x: x[:, cols], lambda x: x[:, -1], lambda x: x[rows[:3], cols],
                    lambda x: x[_lib(x).arange(n), x.argmax(1)]]
    return options[rng.integers(len(options))], 1


def _matmul(rng, shapes):
    shape = shapes[0]
    if not shape or shape[-1] != 4 or len(shape) > 2:
        return None
    options = [lambda x, w: x @ w, lambda x, w: x.matmul(w.t()), lambda x, w: _lib(x).mm(x.reshape(-1, 4), w),
               lambda x, w: w @ x.t() if x.dim() == 2 else w @ x]
    return options[rng.integers(len(options))], "w"


def _join(rng, shapes):
    shape = shapes[0]
    if not shape:
        return None
    d = int(rng.integers(-len(shape), len(shape)))
    options = [lambda a, b: _lib(a).cat([a, b], dim=d), lambda a, b: _lib(a).stack([a, b], d),
               lambda a, b: _lib(a).cat((a, a * 2), d)]
    return options[rng.integers(len(options))], "same"


def _inplace(rng, shapes):
    shape = shapes[0]
    options = [
        lambda x, y: x.add_(y), lambda x, y: x.sub_(y), lambda x, y: x.mul_(y), lambda x, y: x.div_(y * y + 1),
        lambda x, y: x.copy_(y),
    ]
    unary = [
        lambda x: x.mul_(0.5), lambda x: x.add_(1.0), lambda x: x.div_(2.0), lambda x: x.clamp_(-1, 1),
        lambda x: x.relu_(), lambda x: x.pow_(2), lambda x: x.zero_(), lambda x: x.fill_(0.25),
        lambda x: x.clamp_(-2, 2).exp_(), lambda x: _iadd(x),
    ]
    if shape and shape[0] > 1:
        unary += [lambda x: x[0].mul_(3.0), lambda x: x[1:].add_(1.0), lambda x: _setitem(x, 0, 0.5),
                  lambda x: _setitem(x, [0, 0], -1.0), lambda x: x.view(-1)[::2].zero_()]
    if len(shape) == 2 and shape[1] > 1:
        unary += [lambda x: x.t()[1].fill_(0.5), lambda x: x[:, :1].mul_(2.0), lambda x: _setitem(x, x > 0.5, 0.0)]
    if rng.random() < 0.5:
        return options[rng.integers(len(options))], "into"
    return unary[rng.integers(len(unary))], "inplace"


def _iadd(x):
    x += 1.0
    return x


def _setitem(x, index, value):
    x[index] = value
    return x


MENU = [(_unary, 4), (_binary, 4), (_reduction, 2), (_shape_op, 2), (_index, 2), (_matmul, 1), (_join, 1),
        (_inplace, 4)]


# ----- running one program in both libraries -------------------------------------------------------------------
class Pair:
    """The same value in gradviz (``g``) and in torch (``t``)."""

    def __init__(self, g, t, leaf=False):
        self.g, self.t, self.leaf = g, t, leaf
        self.g_version = g._version if g is not None else 0
        self.t_version = t._version if t is not None else 0

    @property
    def shape(self):
        return tuple(self.t.shape)


def _call(fn, args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return fn(*args), None
        except Exception as exc:  # noqa: BLE001 - compared with the other library's exception below
            return None, exc


def _same_outcome(where, g, t):
    """Both succeeded, or both raised the same exception type with the same message prefix."""
    gv_exc, t_exc = g[1], t[1]
    if t_exc is None and gv_exc is None:
        return True
    assert t_exc is not None, f"{where}: gradviz raised {gv_exc!r}, torch did not"
    assert gv_exc is not None, f"{where}: torch raised {t_exc!r}, gradviz did not"
    assert isinstance(gv_exc, type(t_exc)), f"{where}: gradviz raised {gv_exc!r}, torch {t_exc!r}"
    assert _prefix(gv_exc) == _prefix(t_exc), f"{where}: gradviz says {gv_exc}\n  torch says {t_exc}"
    return False


def _check_state(where, pair):
    g, t = pair.g, pair.t
    assert tuple(g.shape) == tuple(t.shape), f"{where}: shape {tuple(g.shape)} != {tuple(t.shape)}"
    np.testing.assert_allclose(g.detach().numpy(), t.detach().numpy(), rtol=1e-10, atol=1e-12,
                               err_msg=f"{where}: values")
    # Versions are compared as bumps since the value was made (torch's own kernels sometimes leave a fresh
    # result at version 1, e.g. a 1-D matmul squeezed in place).
    g_bumps, t_bumps = g._version - pair.g_version, t._version - pair.t_version
    assert g_bumps == t_bumps, f"{where}: {g_bumps} in-place bumps, torch {t_bumps}"
    assert g.requires_grad == t.requires_grad, f"{where}: requires_grad {g.requires_grad} != {t.requires_grad}"
    assert g.is_leaf == t.is_leaf, f"{where}: is_leaf {g.is_leaf} != {t.is_leaf}"


def _choose(rng, pool, want, first):
    """Pick operands for an op whose parameters were drawn for ``first``: ``want`` is 1, 2 (broadcastable),
    "w" (the matrix leaf), "same" (equal shapes), "into" (a non-leaf target and a value broadcastable to its
    shape) or "inplace" (a non-leaf target)."""
    if want == 1:
        return [first]
    if want == "w":
        return [first, pool[3]]
    if want == 2:
        partners = [p for p in pool if _broadcasts(first.shape, p.shape)]
        return [first, partners[rng.integers(len(partners))]]
    if want == "same":
        partners = [p for p in pool if p.shape == first.shape]
        return [first, partners[rng.integers(len(partners))]]
    if first.leaf:
        return None
    target = first
    if want == "inplace":
        return [target]
    values = [p for p in pool if _broadcasts(p.shape, target.shape)
              and np.broadcast_shapes(p.shape, target.shape) == target.shape]
    return [target, values[rng.integers(len(values))]]


def run_program(seed):
    rng = np.random.default_rng(seed)
    pool = []
    for shape in LEAF_SHAPES:
        data = rng.standard_normal(shape)
        pool.append(Pair(gv.tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True), leaf=True))
    const = rng.standard_normal((3, 4))
    pool.append(Pair(gv.tensor(const), torch.tensor(const), leaf=True))  # a leaf that needs no grad
    leaves = list(pool)
    log = []
    for step in range(N_STEPS):
        make = MENU[rng.choice(len(MENU), p=_weights())][0]
        first = pool[rng.integers(len(pool))]
        drawn = make(rng, [first.shape])
        if drawn is None:
            continue
        fn, want = drawn
        operands = _choose(rng, pool, want, first)
        if operands is None:
            continue
        log.append(f"step {step}: {make.__name__} on shapes {[p.shape for p in operands]}")
        where = f"seed {seed}, " + "; ".join(log[-3:])
        g = _call(fn, [p.g for p in operands])
        t = _call(fn, [p.t for p in operands])
        if not _same_outcome(where, g, t):
            return "error at step"
        out = Pair(g[0], t[0])
        if want in ("into", "inplace"):
            pass  # the target (already in the pool) changed; every Variable is re-checked below
        elif isinstance(out.t, torch.Tensor) and out.t.dtype.is_floating_point:
            pool.append(out)
        for p in pool:  # versions, values and graph flags of everything, after every step
            _check_state(where, p)
    return _backward_and_compare(seed, rng, pool, leaves, log)


def _weights():
    w = np.array([weight for _, weight in MENU], dtype=float)
    return w / w.sum()


def _backward_and_compare(seed, rng, pool, leaves, log):
    where = f"seed {seed} backward, after " + "; ".join(log[-3:])
    retained = [p for p in pool if not p.leaf and p.t.requires_grad and rng.random() < 0.3]
    for p in retained:
        p.g.retain_grad()
        p.t.retain_grad()
    coefficients = [float(c) for c in rng.uniform(0.5, 1.5, len(pool))]

    def loss(lib_values, lib):
        terms = [(v * c).sum() for v, c in zip(lib_values, coefficients) if v.requires_grad]
        return terms

    g_terms, t_terms = loss([p.g for p in pool], gv), loss([p.t for p in pool], torch)
    if not t_terms:
        return "nothing requires grad"
    g = _call(lambda: sum(g_terms[1:], g_terms[0]).backward(), [])
    t = _call(lambda: sum(t_terms[1:], t_terms[0]).backward(), [])
    if not _same_outcome(where, g, t):
        return "error in backward"
    for k, p in enumerate(leaves[:4]):
        tg, gg = p.t.grad, p.g.grad
        assert (tg is None) == (gg is None), f"{where}: leaf {k} grad {gg} vs torch {tg}"
        if tg is not None:
            np.testing.assert_allclose(gg.numpy(), tg.numpy(), rtol=1e-6, atol=1e-6, err_msg=f"{where}: leaf {k}")
    for p in retained:
        gg, tg = p.g.grad, p.t.grad
        assert (gg is None) == (tg is None), f"{where}: retained grad {gg} vs torch {tg}"
        if tg is not None:
            np.testing.assert_allclose(gg.numpy(), tg.numpy(), rtol=1e-6, atol=1e-6, err_msg=f"{where}: retained")
    # A second backward through the freed graph fails in both, or (nothing saved anywhere) succeeds in both.
    g = _call(lambda: sum(g_terms[1:], g_terms[0]).backward(), [])
    t = _call(lambda: sum(t_terms[1:], t_terms[0]).backward(), [])
    _same_outcome(where + " (second backward)", g, t)
    return "completed"


@pytest.mark.parametrize("chunk", range(8))
def test_random_programs_match_pytorch(chunk):
    outcomes = [run_program(seed) for seed in range(chunk, N_PROGRAMS, 8)]
    # The generator must mostly produce programs that reach backward, or the test checks little.
    assert outcomes.count("completed") >= len(outcomes) // 2, outcomes


# ----- the named errors: same type, same message prefix ---------------------------------------------------------
def _leaf(lib, *shape, **kw):
    return lib.ones(*shape, dtype=lib.float64, requires_grad=True, **kw)


def _non_scalar_backward(T):
    (_leaf(T, 3) * 2).backward()


def _backward_twice(T):
    y = (_leaf(T, 3) ** 2).sum()
    y.backward()
    y.backward()


def _stale(op):
    def program(T):
        x = _leaf(T, 3)
        y = op(x)
        y.add_(1)
        y.sum().backward()
    return program


def _stale_through_view(T):
    x = _leaf(T, 2, 3)
    y = x.exp()
    y[0].mul_(2)
    y.sum().backward()


def _stale_saved_input_through_view(T):
    y = _leaf(T, 3) * 1
    z = y * y
    y[:2].add_(1)
    z.sum().backward()


def _leaf_inplace(T):
    _leaf(T, 3).add_(1)


def _leaf_setitem(T):
    x = _leaf(T, 3)
    x[0] = 2.0


def _view_of_leaf_inplace(T):
    _leaf(T, 3)[:2].mul_(2)


def _no_grad_fn(T):
    T.ones(3).sum().backward()


def _int_requires_grad(T):
    T.ones(3, dtype=T.int64).requires_grad = True


def _gradient_shape_mismatch(T):
    (_leaf(T, 3) * 2).backward(T.ones(2, dtype=T.float64))


def _grad_unused(T):
    x, z = _leaf(T, 3), _leaf(T, 3)
    T.autograd.grad((x * 2).sum(), [x, z])


def _non_leaf_requires_grad(T):
    y = _leaf(T, 3) * 2
    y.requires_grad = False


def _expanded_write(T):
    y = (_leaf(T, 3) * 1).unsqueeze(0).expand(2, 3)
    y.add_(1)


ERROR_PROGRAMS = {
    "non-scalar backward": _non_scalar_backward,
    "backward twice": _backward_twice,
    "stale exp output": _stale(lambda x: x.exp()),
    "stale sigmoid output": _stale(lambda x: x.sigmoid()),
    "stale relu output": _stale(lambda x: x.relu()),
    "stale tanh output": _stale(lambda x: x.tanh()),
    "stale saved output written through a view": _stale_through_view,
    "stale saved input written through a view": _stale_saved_input_through_view,
    "leaf in-place": _leaf_inplace,
    "leaf setitem": _leaf_setitem,
    "view of leaf in-place": _view_of_leaf_inplace,
    "no grad_fn backward": _no_grad_fn,
    "requires_grad on int tensor": _int_requires_grad,
    "gradient shape mismatch": _gradient_shape_mismatch,
    "autograd.grad unused input": _grad_unused,
    "requires_grad=False on non-leaf": _non_leaf_requires_grad,
    "write into an expanded view": _expanded_write,
}


@pytest.mark.parametrize("name", sorted(ERROR_PROGRAMS))
def test_same_error_as_pytorch(name):
    program = ERROR_PROGRAMS[name]
    g, t = _call(program, [gv]), _call(program, [torch])
    assert t[1] is not None, f"the torch program for {name!r} should fail"
    _same_outcome(name, g, t)
    assert type(t[1]) is RuntimeError
