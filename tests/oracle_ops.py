"""Run one op on gradviz and on PyTorch from the same data and compare values, dtypes, shapes, which outputs
require grad, and the gradients of every input (float64, tolerance 1e-6). Shared by the op oracle tests."""

import re

import numpy as np

import gradviz as gv


def _to_lib(lib, value, requires_grad):
    if isinstance(value, np.ndarray):
        t = lib.tensor(value)
        if requires_grad and value.dtype.kind == "f":
            t.requires_grad_()
        return t
    return value


def _outputs(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def compare(fn, *arrays, grad=True, seed=0, tol=1e-6):
    """``fn(lib, *tensors)`` on gradviz and torch; arrays are numpy (float arrays become tensors requiring grad)."""
    import torch

    ours_in = [_to_lib(gv, a, grad) for a in arrays]
    theirs_in = [_to_lib(torch, a, grad) for a in arrays]
    ours, theirs = _outputs(fn(gv, *ours_in)), _outputs(fn(torch, *theirs_in))
    assert len(ours) == len(theirs)
    rng = np.random.default_rng(seed)
    ours_loss, theirs_loss = [], []
    for o, t in zip(ours, theirs):
        assert tuple(o.shape) == tuple(t.shape), (o.shape, t.shape)
        assert str(o.dtype) == str(t.dtype).replace("torch.", ""), (o.dtype, t.dtype)
        assert o.requires_grad == t.requires_grad, (o.requires_grad, t.requires_grad)
        np.testing.assert_allclose(o.detach().numpy(), t.detach().numpy(), rtol=tol, atol=tol)
        if t.requires_grad:
            w = rng.standard_normal(tuple(t.shape))
            ours_loss.append((o * gv.tensor(w, dtype=o.dtype)).sum())
            theirs_loss.append((t * torch.tensor(w, dtype=t.dtype)).sum())
    if ours_loss:
        sum(ours_loss).backward()
        sum(theirs_loss).backward()
        for o, t in zip(ours_in, theirs_in):
            if isinstance(t, torch.Tensor) and t.requires_grad:
                assert (o.grad is None) == (t.grad is None)
                if t.grad is not None:
                    np.testing.assert_allclose(o.grad.numpy(), t.grad.numpy(), rtol=tol, atol=tol)
    return ours, theirs


def same_error(fn, *arrays):
    """Both libraries raise on ``fn``: the same exception family and the same message (up to gradviz's additions
    after the PyTorch text, and PyTorch's C++ traceback after a newline)."""
    import torch

    errors = []
    for lib in (gv, torch):
        tensors = [_to_lib(lib, a, False) for a in arrays]
        try:
            fn(lib, *tensors)
        except Exception as err:  # noqa: BLE001 - the test compares whatever each raised
            errors.append(err)
        else:
            raise AssertionError(f"{lib.__name__} raised nothing")
    ours, theirs = errors
    theirs_text = str(theirs).split("\n")[0]
    assert str(ours).startswith(theirs_text), (str(ours), theirs_text)
    base = next(c for c in (IndexError, TypeError, NotImplementedError, RuntimeError, ValueError)
                if isinstance(theirs, c))
    assert isinstance(ours, base), (type(ours), type(theirs))
    return ours


def words(message):
    return re.sub(r"\s+", " ", str(message))
