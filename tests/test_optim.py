"""The optimizer API: groups, zero_grad, in-place updates with version bumps, state dicts, errors, observers."""

import numpy as np
import pytest

import gradviz as gv
import gradviz.nn as nn
import gradviz.optim as optim
from gradviz.autograd import observer
from gradviz.errors import StaleVersionError, UnsupportedError


def _param(values):
    return nn.Parameter(gv.tensor(values))


def test_sgd_step_updates_in_place_and_bumps_the_version():
    p = _param([1.0, 2.0])
    storage = p.detach().numpy()
    p.grad = gv.tensor([0.5, -1.0])
    opt = optim.SGD([p], lr=0.1)
    version = p.version
    opt.step()
    np.testing.assert_allclose(p.detach().numpy(), [0.95, 2.1], rtol=1e-6)
    assert p.detach().numpy() is storage or np.shares_memory(p.detach().numpy(), storage)
    assert p.version == version + 1 and p.grad_fn is None and p.is_leaf


def test_step_between_forward_and_backward_is_caught_as_a_stale_weight():
    lin = nn.Linear(2, 2)
    opt = optim.SGD(lin.parameters(), lr=0.1)
    loss = lin(gv.ones(1, 2)).sum()
    loss.backward(retain_graph=True)
    out = lin(gv.ones(1, 2, requires_grad=True)).sum()  # this graph saved the weight (the input needs grad)
    opt.step()
    with pytest.raises(StaleVersionError, match="AddmmBackward"):
        out.backward()


def test_zero_grad_and_skipping_params_without_grad():
    a, b = _param([1.0]), _param([2.0])
    opt = optim.Adam([a, b], lr=0.1)
    a.grad = gv.tensor([1.0])
    opt.step()
    assert b.item() == 2.0 and b not in opt.state and opt.state[a]["step"].item() == 1.0
    opt.zero_grad(set_to_none=False)
    assert a.grad is not None and a.grad.item() == 0.0
    opt.zero_grad()
    assert a.grad is None


def test_float32_updates_stay_float32():
    p = nn.Parameter(gv.ones(3))
    for opt in (optim.SGD([p], lr=0.1, momentum=0.9, weight_decay=0.1, nesterov=True),
                optim.Adam([p], lr=0.1, weight_decay=0.1, amsgrad=True)):
        for _ in range(2):
            p.grad = gv.ones(3)
            opt.step()
        assert p.dtype == gv.float32
        assert all(v.dtype == gv.float32 for k, v in opt.state[p].items() if k != "step")


def test_param_groups_with_their_own_settings():
    a, b = _param([1.0]), _param([1.0])
    opt = optim.SGD([{"params": [a]}, {"params": b, "lr": 1.0}], lr=0.1)
    a.grad, b.grad = gv.tensor([1.0]), gv.tensor([1.0])
    opt.step()
    assert a.item() == pytest.approx(0.9) and b.item() == pytest.approx(0.0)
    opt.param_groups[0]["lr"] = 0.5  # what a scheduler does
    opt.step()
    assert a.item() == pytest.approx(0.4)
    c = _param([0.0])
    opt.add_param_group({"params": [c], "momentum": 0.5})
    assert opt.param_groups[2]["lr"] == 0.1 and opt.param_groups[2]["momentum"] == 0.5


def test_closure_is_evaluated_with_grad_enabled():
    p = _param([3.0])
    opt = optim.SGD([p], lr=0.5)

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss

    with gv.no_grad():
        loss = opt.step(closure)
    assert loss.item() == 9.0 and p.item() == 0.0


def test_state_dict_round_trip_continues_identically():
    def run(opt_from_state=None):
        p = _param([1.0, -1.0])
        opt = optim.Adam([p], lr=0.1)
        if opt_from_state is not None:
            opt.load_state_dict(opt_from_state)
        return p, opt

    p, opt = run()
    for _ in range(3):
        p.grad = gv.tensor([0.3, -0.2])
        opt.step()
    saved = opt.state_dict()
    assert saved["param_groups"][0]["params"] == [0] and set(saved["state"][0]) == {"step", "exp_avg", "exp_avg_sq"}
    q, opt2 = run(saved)
    q.data = p.detach().clone()
    for o, v in ((opt, p), (opt2, q)):
        v.grad = gv.tensor([0.1, 0.4])
        o.step()
    np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())
    assert opt2.state[q]["exp_avg"] is not opt.state[p]["exp_avg"]


def test_load_state_dict_refuses_mismatched_groups():
    opt = optim.SGD([_param([1.0])], lr=0.1)
    other = optim.SGD([_param([1.0]), _param([2.0])], lr=0.1)
    with pytest.raises(ValueError, match="loaded state dict contains a parameter group that doesn't match the "
                                         "size of optimizer's group"):
        opt.load_state_dict(other.state_dict())
    with pytest.raises(ValueError, match="loaded state dict has a different number of parameter groups"):
        opt.load_state_dict({"state": {}, "param_groups": []})


@pytest.mark.parametrize("make, error, message", [
    (lambda: optim.SGD([], lr=0.1), ValueError, "optimizer got an empty parameter list"),
    (lambda: optim.SGD(gv.ones(2), lr=0.1), TypeError,
     "params argument given to the optimizer should be an iterable of Tensors or dicts, but got "
     "torch.FloatTensor"),
    (lambda: optim.SGD([gv.ones(2, requires_grad=True) * 2], lr=0.1), ValueError, "can't optimize a non-leaf"),
    (lambda: optim.SGD([1.0], lr=0.1), TypeError, "optimizer can only optimize Tensors, but one of the params is "
                                                  "float"),
    (lambda: optim.SGD([_param([1.0])], lr=0.1).add_param_group({"params": {_param([1.0])}}), TypeError,
     "ordered collections"),
    (lambda: optim.SGD([_param([1.0])], lr=-0.1), ValueError, "Invalid learning rate: -0.1"),
    (lambda: optim.SGD([_param([1.0])], lr=0.1, momentum=-1), ValueError, "Invalid momentum value: -1"),
    (lambda: optim.SGD([_param([1.0])], lr=0.1, nesterov=True), ValueError,
     "Nesterov momentum requires a momentum and zero dampening"),
    (lambda: optim.Adam([_param([1.0])], betas=(1.0, 0.9)), ValueError, "Invalid beta parameter at index 0: 1.0"),
    (lambda: optim.Adam([_param([1.0])], eps=-1.0), ValueError, "Invalid epsilon value: -1.0"),
    (lambda: optim.Adam([_param([1.0])], weight_decay=-1), ValueError, "Invalid weight_decay value: -1"),
    (lambda: optim.Adam([_param([1.0])], differentiable=True), UnsupportedError, "differentiable=True"),
])
def test_constructor_errors_use_pytorch_wording(make, error, message):
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        make()


def test_a_parameter_in_two_groups_is_refused():
    p = _param([1.0])
    opt = optim.SGD([p], lr=0.1)
    with pytest.raises(ValueError, match="some parameters appear in more than one parameter group"):
        opt.add_param_group({"params": p})


class Events(observer.Observer):
    def __init__(self):
        self.seen = []

    def on_optimizer(self, optimizer, event):
        self.seen.append((optimizer, event, [p.version for p in optimizer.param_groups[0]["params"]]))


def test_step_and_zero_grad_are_observed_after_they_happen():
    p = _param([1.0])
    opt = optim.SGD([p], lr=0.1)
    p.grad = gv.tensor([1.0])
    events = Events()
    with observer.observing(events):
        opt.step()
        opt.zero_grad()
    before = 0
    assert [(o, e) for o, e, _ in events.seen] == [(opt, "step"), (opt, "zero_grad")]
    assert events.seen[0][2] == [before + 1]  # the update (version bump) is done when observers hear of it
    opt.step()  # unobserved: nothing recorded
    assert len(events.seen) == 2
