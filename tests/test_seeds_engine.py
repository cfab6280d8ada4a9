"""The founding Stack Overflow question (shared/seeds/000_*), run in gradviz and in PyTorch on identical inputs.

Each scenario is written once against a module ``T`` (gradviz or torch) and its ``nn``; the numbers must agree.
"""

import numpy as np
import pytest

import gradviz as gv
import gradviz.nn as gnn
from gradviz.autograd import Variable

torch = pytest.importorskip("torch")

X_DATA = np.random.default_rng(42).standard_normal((1, 5)).astype(np.float32)
Y_DATA = np.random.default_rng(7).standard_normal((1, 5)).astype(np.float32)


def models(nn):
    class Model1(nn.Module):
        def forward(self, x):
            return x.pow(3)

    class Model2(nn.Module):
        def forward(self, x):
            return x / 2

    return Model1(), Model2()


def _libs():
    return [(gv, gnn, Variable), (torch, torch.nn, torch.autograd.Variable)]


def _inputs(T):
    return T.tensor(X_DATA, requires_grad=True), T.tensor(Y_DATA)


def variable_trick(T, nn, Var):
    """The asker's working version: cut the graph with Variable(y1.data), then backward twice by hand."""
    model1, model2 = models(nn)
    X, y = _inputs(T)
    y1 = model1(X)
    v = Var(y1.data, requires_grad=True)
    y2 = model2(v)
    loss = nn.MSELoss()(y2, y)
    loss.backward()
    y1.backward(v.grad)
    return loss.item(), v.grad.numpy().copy(), X.grad.numpy().copy()


def chained(T, nn, Var):
    """The accepted fix: chain the models (nn.Sequential) and call backward once."""
    model = nn.Sequential(*models(nn))
    X, y = _inputs(T)
    loss = nn.MSELoss()(model(X), y)
    loss.backward()
    return loss.item(), X.grad.numpy().copy()


def chained_by_hand(T, nn, Var):
    model1, model2 = models(nn)
    X, y = _inputs(T)
    loss = nn.MSELoss()(model2(model1(X)), y)
    loss.backward()
    return loss.item(), X.grad.numpy().copy()


def hook_extraction(T, nn, Var):
    """The first answer: copy y1's gradient out with a hook, keep the graph, backward from y1 again."""
    def extract(V):
        def hook(grad):
            V.grad = grad
        return hook

    model1, model2 = models(nn)
    X, y = _inputs(T)
    y1 = model1(X)
    y2 = model2(y1)
    loss = nn.MSELoss()(y2, y)
    y1.register_hook(extract(y1))
    loss.backward(retain_graph=True)
    extracted = y1.grad.numpy().copy()
    y1.backward(y1.grad)
    return extracted, X.grad.numpy().copy()


def broken(T, nn, Var):
    """The asker's failing version: y1.grad is None after loss.backward(), so y1.backward(None) fails."""
    model1, model2 = models(nn)
    X, y = _inputs(T)
    y1 = model1(X)
    y2 = model2(y1)
    loss = nn.MSELoss()(y2, y)
    loss.backward(retain_graph=True)
    with pytest.warns(UserWarning, match="is not a leaf Tensor is being accessed"):
        grad = y1.grad
    with pytest.raises(RuntimeError) as err:
        y1.backward(grad)
    return grad, str(err.value), type(err.value)


def _close(a, b):
    for u, w in zip(a, b):
        np.testing.assert_allclose(u, w, rtol=1e-6, atol=1e-7)


def test_variable_trick_gives_pytorchs_numbers():
    ours, theirs = (variable_trick(*lib) for lib in _libs())
    _close(ours, theirs)
    loss, v_grad, x_grad = ours
    # By hand: loss = mean((x**3/2 - y)**2); dL/dv = (v/2 - y)/5, dL/dx = dL/dv * 3x**2.
    expected_v = (X_DATA ** 3 / 2 - Y_DATA) / 5
    np.testing.assert_allclose(v_grad, expected_v, rtol=1e-5)
    np.testing.assert_allclose(x_grad, expected_v * 3 * X_DATA ** 2, rtol=1e-5)


def test_the_variable_trick_cuts_the_graph():
    model1, model2 = models(gnn)
    X, _ = _inputs(gv)
    y1 = model1(X)
    v = Variable(y1.data, requires_grad=True)
    assert v.is_leaf and v.grad_fn is None and y1.grad_fn.name() == "PowBackward"
    assert np.shares_memory(v.numpy() if not v.requires_grad else v.detach().numpy(), y1.detach().numpy())


def test_chained_models_give_pytorchs_numbers():
    for run in (chained, chained_by_hand):
        ours, theirs = (run(*lib) for lib in _libs())
        _close(ours, theirs)
    # And the same gradient as the two-step Variable trick.
    np.testing.assert_allclose(chained(*_libs()[0])[1], variable_trick(*_libs()[0])[2], rtol=1e-6)


def test_hook_extraction_gives_pytorchs_numbers():
    ours, theirs = (hook_extraction(*lib) for lib in _libs())
    _close(ours, theirs)
    extracted, x_grad = ours
    np.testing.assert_allclose(extracted, (X_DATA ** 3 / 2 - Y_DATA) / 5, rtol=1e-5)  # dL/dy1
    # The second backward adds y1's extracted gradient through x**3 again: twice the chained gradient.
    np.testing.assert_allclose(x_grad, 2 * chained(*_libs()[0])[1], rtol=1e-5)


def test_backward_with_y1_grad_fails_as_in_pytorch():
    ours, theirs = (broken(*lib) for lib in _libs())
    assert ours[0] is None and theirs[0] is None
    assert ours[1] == theirs[1] == "grad can be implicitly created only for scalar outputs"
    assert issubclass(ours[2], RuntimeError)


def test_hook_retains_the_graph_and_its_buffers():
    """The OOM the asker reported: with retain_graph=True every saved buffer stays alive until y1.backward."""
    model1, model2 = models(gnn)
    X, y = _inputs(gv)
    y1 = model1(X)
    loss = gnn.MSELoss()(model2(y1), y)
    loss.backward(retain_graph=True)
    pow_node = y1.grad_fn
    assert not pow_node.freed and sum(s.nbytes for s in pow_node.saved) > 0
    y1.backward(gv.ones(1, 5))
    assert pow_node.freed and pow_node.saved == ()
