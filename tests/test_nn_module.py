"""The Module API: registration, traversal, modes, hooks, state dicts, dtype changes, containers, observers."""

import copy
import pickle

import numpy as np
import pytest

import gradviz as gv
import gradviz.nn as nn
from gradviz.autograd import observer
from gradviz.errors import DeviceError, UnsupportedError


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)
        self.act = nn.ReLU()
        self.scale = nn.Parameter(gv.ones(2))

    def forward(self, x):
        return self.act(self.fc(x)) * self.scale


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = Block()
        self.second = nn.Sequential(nn.Linear(2, 2), nn.Tanh())
        self.shared = self.first.fc  # the same module twice: counted once
        self.register_buffer("steps", gv.zeros(1))
        self.register_buffer("scratch", gv.zeros(1), persistent=False)

    def forward(self, x):
        return self.second(self.first(x))


# ----- registration and traversal ---------------------------------------------------------------------------
def test_named_parameters_are_dotted_and_deduplicated():
    net = Net()
    assert [n for n, _ in net.named_parameters()] == [
        "first.scale", "first.fc.weight", "first.fc.bias", "second.0.weight", "second.0.bias"]
    assert len(list(net.parameters())) == 5
    assert [n for n, _ in net.named_parameters(remove_duplicate=False)].count("shared.weight") == 1
    assert [n for n, _ in net.named_parameters(recurse=False)] == []
    assert [n for n, _ in net.first.named_parameters(prefix="p")][0] == "p.scale"


def test_children_and_modules_in_registration_order():
    net = Net()
    # As in PyTorch: a module assigned under a second name is a child twice, yet one module of the tree.
    assert [n for n, _ in net.named_children()] == ["first", "second", "shared"]
    assert list(net.children()) == [net.first, net.second, net.first.fc]
    assert [n for n, _ in net.named_modules()] == ["", "first", "first.fc", "first.act", "second", "second.0",
                                                   "second.1"]
    assert len(list(net.modules())) == 7
    assert net.get_submodule("second.1") is net.second[1]
    assert net.get_parameter("first.fc.bias") is net.first.fc.bias


def test_buffers_are_registered_and_only_persistent_ones_saved():
    net = Net()
    assert [n for n, _ in net.named_buffers()] == ["steps", "scratch"]
    assert "steps" in net.state_dict() and "scratch" not in net.state_dict()


def test_setattr_rules_follow_pytorch():
    lin = nn.Linear(2, 2)
    with pytest.raises(TypeError, match=r"cannot assign 'torch.FloatTensor' as parameter 'weight' "
                                        r"\(torch.nn.Parameter or None expected\)"):
        lin.weight = gv.ones(2, 2)
    lin.bias = None
    assert [n for n, _ in lin.named_parameters()] == ["weight"]
    lin.extra = nn.Parameter(gv.zeros(1))
    assert "extra" in dict(lin.named_parameters())
    del lin.extra
    assert "extra" not in dict(lin.named_parameters())
    with pytest.raises(AttributeError, match="'Linear' object has no attribute 'nothing'"):
        lin.nothing  # noqa: B018

    class Early(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(gv.ones(1))

    with pytest.raises(AttributeError, match=r"cannot assign parameters before Module.__init__\(\) call"):
        Early()


def test_missing_forward_and_backward_hooks_are_explained():
    with pytest.raises(NotImplementedError, match=r'Module \[ModuleList\] is missing the required "forward"'):
        nn.ModuleList()(gv.ones(1))
    with pytest.raises(UnsupportedError, match="register a hook on the output tensor"):
        nn.Linear(1, 1).register_full_backward_hook(lambda *a: None)


# ----- modes, grads, bulk changes ---------------------------------------------------------------------------
def test_train_eval_reach_every_module():
    net = Net()
    assert net.eval() is net
    assert all(not m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())
    with pytest.raises(ValueError, match="training mode is expected to be boolean"):
        net.train("yes")


def test_zero_grad_sets_none_or_zeros_in_place():
    lin = nn.Linear(3, 2)
    lin(gv.ones(4, 3)).sum().backward()
    grad = lin.weight.grad
    lin.zero_grad(set_to_none=False)
    assert lin.weight.grad is grad and not grad.numpy().any()
    lin.zero_grad()
    assert lin.weight.grad is None and lin.bias.grad is None


def test_requires_grad_and_apply():
    net = Net()
    assert net.requires_grad_(False) is net
    assert not any(p.requires_grad for p in net.parameters())
    visited = []
    assert net.apply(lambda m: visited.append(type(m).__name__)) is net
    assert visited == ["Linear", "ReLU", "Block", "Linear", "Tanh", "Sequential", "Linear", "Net"]


def test_double_and_float_convert_in_place_keeping_parameter_objects():
    net = Net()
    weight = net.first.fc.weight
    net(gv.ones(1, 3)).sum().backward()
    assert net.double() is net
    assert net.first.fc.weight is weight
    assert all(p.dtype == gv.float64 for p in net.parameters())
    assert weight.grad.dtype == gv.float64 and net.steps.dtype == gv.float64
    out = net(gv.ones(1, 3, dtype=gv.float64))
    assert out.dtype == gv.float64
    assert net.to(gv.float32).first.fc.weight.dtype == gv.float32
    assert net.to("cpu") is net
    with pytest.raises(DeviceError, match="^Torch not compiled with CUDA enabled: gradviz's engine runs on the CPU"):
        net.to("cuda")
    assert isinstance(DeviceError("x"), AssertionError)  # what PyTorch built without CUDA raises


def test_deepcopy_and_pickle_give_independent_equal_modules():
    net = Net()
    for clone in (copy.deepcopy(net), pickle.loads(pickle.dumps(net))):
        assert clone.shared is clone.first.fc  # sharing survives
        for p, q in zip(net.parameters(), clone.parameters()):
            assert p is not q and isinstance(q, nn.Parameter) and q.requires_grad
            np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())
        clone.first.fc.weight.data.numpy()[...] = 7
        assert not (net.first.fc.weight.detach().numpy() == 7).any()


# ----- hooks and observers ----------------------------------------------------------------------------------
def test_forward_hooks_can_replace_args_and_output_and_be_removed():
    lin = nn.Linear(2, 2)
    calls = []
    pre = lin.register_forward_pre_hook(lambda m, args: (args[0] * 0,))
    post = lin.register_forward_hook(lambda m, args, out: calls.append((m, args[0].sum().item())) or out + 100)
    out = lin(gv.ones(1, 2))
    np.testing.assert_allclose(out.detach().numpy(), lin.bias.detach().numpy()[None] + 100, rtol=1e-6)
    assert calls == [(lin, 0.0)]
    pre.remove()
    post.remove()
    out = lin(gv.ones(1, 2))
    assert len(calls) == 1 and out.detach().numpy().max() < 50
    with lin.register_forward_hook(lambda m, a, o: o * 0) as handle:
        assert not lin(gv.ones(1, 2)).detach().numpy().any()
    assert handle.id not in lin._forward_hooks


class Recorder(observer.Observer):
    def __init__(self):
        self.events = []

    def on_module_call(self, module, phase, inputs=None, output=None):
        self.events.append((type(module).__name__, phase, inputs, output))

    def on_variable(self, variable, origin):
        if origin == "parameter":
            self.events.append(("param", tuple(variable.shape)))


def test_module_calls_are_observed_enter_then_exit_nested():
    model = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    x = gv.ones(1, 2)
    rec = Recorder()
    with observer.observing(rec):
        out = model(x)
    names = [(n, p) for n, p, _, _ in rec.events]
    assert names == [("Sequential", "enter"), ("Linear", "enter"), ("Linear", "exit"), ("ReLU", "enter"),
                     ("ReLU", "exit"), ("Sequential", "exit")]
    assert rec.events[0][2] == (x,) and rec.events[-1][3] is out


def test_module_exit_is_observed_when_forward_raises():
    rec = Recorder()
    lin = nn.Linear(3, 2)
    with observer.observing(rec), pytest.raises(RuntimeError, match="mat1 and mat2 shapes cannot be multiplied"):
        lin(gv.ones(1, 4))
    assert [(n, p, o) for n, p, _, o in rec.events] == [("Linear", "enter", None), ("Linear", "exit", None)]


def test_parameter_creation_is_observed():
    rec = Recorder()
    with observer.observing(rec):
        nn.Linear(3, 2)
    assert ("param", (2, 3)) in rec.events and ("param", (2,)) in rec.events


# ----- state dicts ------------------------------------------------------------------------------------------
def test_state_dict_round_trip_copies_values_and_bumps_versions():
    a, b = Net(), Net()
    state = a.state_dict()
    # PyTorch's order: a module's own entries before its children's; a shared module under each name.
    assert list(state) == ["steps", "first.scale", "first.fc.weight", "first.fc.bias", "second.0.weight",
                           "second.0.bias", "shared.weight", "shared.bias"]
    assert not state["first.fc.weight"].requires_grad
    assert np.shares_memory(state["first.fc.weight"].numpy(), a.first.fc.weight.detach().numpy())
    version = b.first.fc.weight.version
    result = b.load_state_dict(state)
    assert repr(result) == "<All keys matched successfully>"
    assert b.first.fc.weight.version == version + 2  # copied once per name ("shared" too), as PyTorch does
    for (n, p), (_, q) in zip(a.state_dict().items(), b.state_dict().items()):
        np.testing.assert_array_equal(p.numpy(), q.numpy(), err_msg=n)
    assert not np.shares_memory(a.first.fc.weight.detach().numpy(), b.first.fc.weight.detach().numpy())
    assert a.state_dict(keep_vars=True)["first.fc.weight"] is a.first.fc.weight


def test_load_state_dict_errors_name_every_problem():
    lin = nn.Linear(2, 3)
    with pytest.raises(RuntimeError) as err:
        lin.load_state_dict({"weight": gv.zeros(3, 3), "foo": gv.zeros(1)})
    assert str(err.value) == (
        'Error(s) in loading state_dict for Linear:\n\tMissing key(s) in state_dict: "bias". \n\t'
        'Unexpected key(s) in state_dict: "foo". \n\tsize mismatch for weight: copying a param with shape '
        "torch.Size([3, 3]) from checkpoint, the shape in current model is torch.Size([3, 2]).")
    result = lin.load_state_dict({"weight": gv.zeros(3, 2), "foo": gv.zeros(1)}, strict=False)
    assert result.missing_keys == ["bias"] and result.unexpected_keys == ["foo"]
    assert not lin.weight.detach().numpy().any()


# ----- containers ---------------------------------------------------------------------------------------------
def test_sequential_indexes_like_a_list():
    layers = [nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 1), nn.Sigmoid()]
    seq = nn.Sequential(*layers)
    assert len(seq) == 4 and list(seq) == layers
    assert seq[0] is layers[0] and seq[-1] is layers[3]
    tail = seq[1:3]
    assert isinstance(tail, nn.Sequential) and list(tail) == layers[1:3]
    assert [n for n, _ in tail.named_children()] == ["1", "2"]
    with pytest.raises(IndexError, match="index 4 is out of range"):
        seq[4]
    with pytest.raises(IndexError, match="index -5 is out of range"):
        seq[-5]
    seq.append(nn.Tanh())
    assert len(seq) == 5 and isinstance(seq[4], nn.Tanh)
    seq[4] = nn.ReLU()
    assert isinstance(seq[-1], nn.ReLU)
    del seq[0]
    assert list(seq) == layers[1:4] + [seq[-1]]


def test_sequential_runs_in_order_and_accepts_an_ordered_dict():
    from collections import OrderedDict

    seq = nn.Sequential(OrderedDict([("twice", Scale(2.0)), ("shift", Shift(1.0))]))
    assert seq(gv.tensor([1.0])).item() == 3.0
    assert seq.twice is seq[0]


class Scale(nn.Module):
    def __init__(self, k):
        super().__init__()
        self.k = k

    def forward(self, x):
        return x * self.k


class Shift(Scale):
    def forward(self, x):
        return x + self.k


def test_module_list_registers_and_renumbers():
    ml = nn.ModuleList([nn.Linear(1, 1) for _ in range(3)])
    assert len(list(nn.Sequential(ml).parameters())) == 6
    assert isinstance(ml[1:], nn.ModuleList) and len(ml[1:]) == 2
    del ml[0]
    assert [n for n, _ in ml.named_children()] == ["0", "1"]
    ml += [nn.ReLU()]
    ml.insert(0, nn.Tanh())
    assert [type(m).__name__ for m in ml] == ["Tanh", "Linear", "Linear", "ReLU"]
    with pytest.raises(TypeError, match="ModuleList.extend should be called with an iterable, but got int"):
        ml.extend(3)


# ----- parameters -------------------------------------------------------------------------------------------
def test_parameter_is_a_leaf_sharing_memory_with_its_source():
    source = gv.zeros(3)
    p = nn.Parameter(source)
    assert p.is_leaf and p.requires_grad and p.grad_fn is None and isinstance(p, gv.Tensor)
    source.numpy()[0] = 5
    assert p.detach().numpy()[0] == 5
    assert not nn.Parameter(gv.zeros(1), requires_grad=False).requires_grad
    with pytest.raises(RuntimeError, match="only Tensors of floating point"):
        nn.Parameter(gv.tensor([1, 2]))


# ----- the seed's models ------------------------------------------------------------------------------------
class Model1(nn.Module):
    def forward(self, x):
        return x.pow(3)


class Model2(nn.Module):
    def forward(self, x):
        return x / 2


def test_seed_fix_chaining_models_in_sequential_backpropagates_once():
    gv.manual_seed(42)
    x = gv.randn(1, 5, requires_grad=True)
    y = gv.randn(1, 5)
    loss = nn.MSELoss()(nn.Sequential(Model1(), Model2())(x), y)
    loss.backward()
    xs, ys = x.detach().numpy().astype(np.float64), y.numpy().astype(np.float64)
    expected = 2 * (xs ** 3 / 2 - ys) / 5 * 0.5 * 3 * xs ** 2
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-5)
    assert loss.grad_fn.name() == "MseLossBackward"
