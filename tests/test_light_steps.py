"""The engine-neutral light-step bookkeeping (tracing/light_steps.py), against a builder that only records what it
is told; and a long REINFORCE episode traced in full inside a light run stays one iteration (grouping's chain
limit under a light schedule)."""

import sys

import pytest

import gradviz
from gradviz.tracing.light_steps import LightSteps


class _Groups:
    hold = 0  # (not holding backward calls for a first step)


class _Builder:
    """What ``LightSteps`` tells a builder, in order; ``full`` says which iterations are to be full."""

    def __init__(self, full=()):
        self.told = []
        self.full = set(full)
        self.ended = 0
        self.held = 0
        self.groups = _Groups()

    def __enter__(self):
        self.held += 1
        return self

    def __exit__(self, *exc):
        self.held -= 1
        return False

    def step_ended(self, signature, light):
        assert self.held == 1  # under the lock
        self.told.append(("ended", light))
        self.ended += 1
        return self.ended in self.full

    def light_graph(self, nbytes, born):
        self.told.append(("graph", nbytes, born))

    def light_freed(self, nbytes):
        self.told.append(("freed", nbytes))

    def light_loss(self, value, location, *, op=None, phase=None, op_location=None, data=None):
        self.told.append(("loss", value, None if location is None else location.line))

    def light_norms(self, norms, location):
        self.told.append(("norms", norms, None if location is None else location.line))


class _Steps(LightSteps):
    def __init__(self, builder):
        super().__init__(builder, builder)
        self.switches = []

    def enter(self):
        self.on = True
        self.switches.append("light")

    def leave(self):
        self.on = False
        self.switches.append("full")


class _Node:
    pass


class _Other:
    pass


def test_the_signature_is_the_modules_shapes_roots_and_call_count_to_a_power_of_two():
    steps = _Steps(_Builder())
    a, b = object(), object()
    steps.note_call(a, ((2, 3),))
    steps.note_call(b, ((2, 5),))
    steps.note_root(_Node())
    first = steps.signature()
    assert first == (frozenset({(id(a), ((2, 3),)), (id(b), ((2, 5),))}), frozenset({"_Node"}), 2)
    steps.note_call(a, ((2, 3),))  # three calls: the same power of two as two
    steps.note_call(a, ((2, 3),))
    steps.note_call(b, ((2, 5),))
    steps.note_root(_Node())
    assert steps.signature() is first
    for _ in range(4):  # four calls: twice as many
        steps.note_call(a, ((2, 3),))
    steps.note_call(b, ((2, 5),))
    steps.note_root(_Node())
    assert steps.signature()[2] == 3
    steps.note_call(a, ((7, 3),))  # a new shape
    steps.note_call(b, ((2, 5),))
    steps.note_root(_Other())  # and a new root class
    assert steps.signature() == (frozenset({(id(a), ((7, 3),)), (id(b), ((2, 5),))}), frozenset({"_Other"}), 2)
    assert (steps.calls, steps.roots, steps.count) == (set(), set(), 0)  # each signature starts afresh


def test_an_optimizer_step_ends_the_iteration_and_switches_to_what_the_builder_says():
    builder = _Builder(full={3})  # the builder wants the iteration after the third end full
    steps = _Steps(builder)
    steps.enter()
    steps.backward_ended()  # no optimizer seen yet: the backward ends iteration 1
    steps.step_ended()  # the step after that backward: not a second end
    steps.backward_ended()  # an optimizer was seen: backward ends nothing now
    steps.step_ended()  # end 2
    steps.step_ended()  # end 3: full next
    steps.step_ended()  # end 4: light again
    assert builder.told == [("ended", True)] * 3 + [("ended", False)]
    assert steps.switches == ["light", "full", "light"]


def test_light_graphs_are_counted_alive_until_they_die_and_freed_once():
    builder = _Builder()
    steps = _Steps(builder)
    marker = _Node()
    steps.watch_graph(marker, id(marker), 512)
    key = id(marker)
    assert steps.watching(key)
    steps.graph_freed(key)
    steps.graph_freed(key)  # a second backward through it frees nothing more
    del marker
    import gc

    gc.collect()
    assert not steps.watching(key)
    assert builder.told == [("graph", 512, True), ("freed", 512), ("graph", 0, False)]


def test_nonfinite_norms_and_roots_are_handed_over_with_the_users_line():
    builder = _Builder()
    steps = _Steps(builder)
    here = sys._getframe()
    steps.gradient_norms([(1, "w", 2.0), (2, "b", 0.5)], lambda: here)
    steps.gradient_norms([(1, "w", float("inf")), (2, "b", 0.5)], lambda: here)
    steps.nonfinite_root(float("nan"), here)
    line = here.f_lineno  # the frame's line when each was handed over: the two lines above this one
    norms, bad, loss = builder.told
    assert norms == ("norms", [(1, "w", 2.0), (2, "b", 0.5)], None)  # all finite: no frame asked for
    assert bad[0] == "norms" and bad[2] == line - 2
    assert loss[0] == "loss" and loss[1] != loss[1] and loss[2] == line - 1


def test_a_500_step_episode_traced_in_full_in_a_light_run_stays_one_iteration():
    """REINFORCE: one policy call per environment step (each a new graph at the same line), one backward through
    all of them at the episode's end. The full episodes keep their own iteration numbers."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    policy = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
    opt = torch.optim.SGD(policy.parameters(), lr=1e-3)
    x = torch.randn(1, 4)
    with gradviz.trace(engine="torch", light=True, trace_steps=(1, 2)) as tr:
        for _episode in range(5):
            log_probs = []
            for _t in range(300):  # more splits than the 256 a trace without schedule keeps open
                log_probs.append(torch.log_softmax(policy(x), dim=1)[0, 0:1])
            loss = -torch.cat(log_probs).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
    doc = tr.to_dict()
    assert doc["schedule"]["full"] == [{"first": 1, "last": 2, "why": "asked"}]
    assert sorted({g["iteration"] for g in doc["graphs"]}) == [1, 2]
    assert len(doc["iterations"]) == 5 if isinstance(doc["iterations"], list) else doc["iterations"] == 5


def test_light_iterations_take_the_global_module_hooks_out_and_put_them_back_in_their_places():
    """While light no global module hook of the trace's is in torch's tables (any one sends every module call down
    _call_impl's slow path): Module.__call__ is wrapped instead. Full again, the hooks are back where they were,
    before a user's global hook registered while they were out, and Module.__call__ is torch's own."""
    torch = pytest.importorskip("torch")
    from torch.nn.modules import module as torch_module

    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(2, 3)
    torch_call = torch.nn.Module.__call__
    seen = {}
    user_calls = []
    with gradviz.trace(engine="torch", light=True, trace_steps=(2, 2)) as tr:
        adapter = tr.adapters[0]
        for step in range(5):
            if step == 1:  # registered while the trace's hooks are out: after them when they are back
                user = torch_module.register_module_forward_pre_hook(lambda m, a: user_calls.append(len(seen) - 1))
            pre = list(torch_module._global_forward_pre_hooks.values())
            post = list(torch_module._global_forward_hooks.values())
            seen[step] = (pre.index(adapter.module_enter) if adapter.module_enter in pre else None,
                          adapter.module_exit in post, torch.nn.Module.__call__ is torch_call)
            opt.zero_grad()
            model(x).pow(2).sum().backward()
            opt.step()
    user.remove()
    light = (None, False, False)
    assert seen == {0: light, 1: light, 2: (0, True, True), 3: light, 4: light}
    assert user_calls == [1, 2, 3, 4]  # the user's hook ran on every call, light or full
    assert torch.nn.Module.__call__ is torch_call  # gone with the trace
    assert adapter.module_enter not in torch_module._global_forward_pre_hooks.values()
    assert not torch_module._global_forward_hooks_always_called
    doc = tr.to_dict()
    assert sorted({g["iteration"] for g in doc["graphs"]}) == [2]  # the full iteration, recorded as before
    assert len(doc["schedule"]["light"]["grad_norms"]) == 2  # the light ones still saw the gradients
