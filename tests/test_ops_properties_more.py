"""Properties of the new ops over random shapes (hypothesis): splitting and joining are inverse, sorting agrees
with gathering by its indices, einsum agrees with numpy's on random equations, and the gradients of random
compositions of the new ops equal central differences."""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import gradviz as gv
from gradviz.autograd import gradcheck

SETTINGS = settings(deadline=None, max_examples=40, suppress_health_check=[HealthCheck.too_slow])
shapes = hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4)


def _x(shape, seed, requires_grad=False):
    data = np.random.default_rng(seed).standard_normal(shape)
    return gv.tensor(data, dtype=gv.float64, requires_grad=requires_grad)


@SETTINGS
@given(shape=shapes, data=st.data())
def test_cat_of_split_is_the_input_and_each_piece_is_a_view(shape, data):
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    size = data.draw(st.integers(1, 4))
    x = _x(shape, 0)
    pieces = x.split(size, dim)
    assert all(p._base is x for p in pieces)
    np.testing.assert_array_equal(gv.cat(pieces, dim).numpy(), x.numpy())
    np.testing.assert_array_equal(gv.stack(x.unbind(dim), dim).numpy(), x.numpy())
    assert len(x.chunk(size, dim)) <= size


@SETTINGS
@given(shape=shapes, data=st.data())
def test_sort_values_are_the_input_gathered_at_the_indices(shape, data):
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    descending = data.draw(st.booleans())
    x = gv.tensor(np.random.default_rng(1).integers(0, 3, shape).astype(np.float64))  # many ties
    values, indices = x.sort(dim, descending=descending)
    np.testing.assert_array_equal(x.gather(dim, indices).numpy(), values.numpy())
    step = np.diff(values.numpy(), axis=dim)
    assert (step <= 0).all() if descending else (step >= 0).all()
    np.testing.assert_array_equal(np.sort(indices.numpy(), axis=dim),
                                  np.broadcast_to(np.arange(shape[dim]).reshape(
                                      [-1 if d == dim % len(shape) else 1 for d in range(len(shape))]), shape))


@st.composite
def einsum_case(draw):
    letters = "abcd"
    n_ops = draw(st.integers(1, 3))
    sizes = {c: draw(st.integers(1, 3)) for c in letters}
    terms = [draw(st.text(alphabet=letters, min_size=1, max_size=3)) for _ in range(n_ops)]
    used = sorted(set("".join(terms)))
    out = draw(st.lists(st.sampled_from(used), unique=True, max_size=len(used)))
    return terms, "".join(out), sizes


@SETTINGS
@given(case=einsum_case(), seed=st.integers(0, 2 ** 16))
def test_einsum_matches_numpy_and_central_differences(case, seed):
    terms, out, sizes = case
    equation = ",".join(terms) + "->" + out
    arrays = [np.random.default_rng(seed + k).standard_normal([sizes[c] for c in t]) for k, t in enumerate(terms)]
    inputs = [gv.tensor(a, dtype=gv.float64, requires_grad=True) for a in arrays]
    np.testing.assert_allclose(gv.einsum(equation, *inputs).detach().numpy(), np.einsum(equation, *arrays),
                               rtol=1e-10, atol=1e-12)
    assert gradcheck(lambda *xs: gv.einsum(equation, *xs), inputs)


CHAINS = {
    "narrow": lambda x: x.narrow(0, 0, max(x.shape[0] - 1, 1)),
    "flip": lambda x: x.flip(0),
    "roll": lambda x: x.roll(1, -1),
    "repeat": lambda x: x.repeat(*([2] + [1] * (x.dim() - 1))),
    "repeat_interleave": lambda x: x.repeat_interleave(2, dim=-1),
    "cumsum": lambda x: x.cumsum(-1),
    "cumprod": lambda x: x.cumprod(0),
    "logsumexp": lambda x: x.logsumexp(-1, keepdim=True),
    "sort": lambda x: x.sort(-1).values,
    "topk": lambda x: x.topk(1, dim=0).values,
    "prod": lambda x: x.prod(-1, keepdim=True),
    "norm": lambda x: x.norm(dim=-1, keepdim=True) * x,
    "std": lambda x: x.std(-1, keepdim=True, correction=0) + x,
    "amax": lambda x: x.amax(-1, keepdim=True) * x,
    "movedim": lambda x: x.movedim(0, -1),
    "tril": lambda x: x.tril() if x.dim() >= 2 else x,
    "take_along_dim": lambda x: gv.take_along_dim(x, gv.zeros(*x.shape[:-1], 1, dtype=gv.int64), -1) * x,
}


@SETTINGS
@given(shape=shapes, ops=st.lists(st.sampled_from(sorted(CHAINS)), min_size=1, max_size=3),
       seed=st.integers(0, 2 ** 16))
def test_gradients_of_random_chains_equal_central_differences(shape, ops, seed):
    x = _x(shape, seed, requires_grad=True)

    def fn(x):
        for name in ops:
            x = CHAINS[name](x)
        return x

    assert gradcheck(fn, (x,), atol=1e-4)
