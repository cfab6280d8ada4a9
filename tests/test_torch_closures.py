"""Code inside ``optimizer.step(closure)`` is traced like any other code on real PyTorch: LBFGS's several closure
calls per step, a SAM-style two-pass step, and the parameter updates the step makes between and after them."""

import os
from functools import partial

import pytest

torch = pytest.importorskip("torch")

import gradviz  # noqa: E402

from . import closure_cases  # noqa: E402
from .closure_cases import lbfgs_keeping_the_first_calls_graph  # noqa: E402
from .marked_lines import marked_line  # noqa: E402

CASES = closure_cases.__file__

pytestmark = pytest.mark.oracle
HERE = os.path.abspath(__file__)
_line_of = partial(marked_line, HERE)  # a line of this file, by its marker comment


def _backward_calls(doc):
    return len(doc["backwards"]) + (doc.get("dropped") or {}).get("backwards", 0)


def _codes(doc):
    return sorted((d["code"], d["location"]["line"]) for d in doc["diagnostics"])


def _lbfgs_run(steps=2, leak=False):
    """LBFGS on a small regression; the closure's calls are counted. ``leak`` plants ``total += loss``."""
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    x, y = torch.randn(16, 3), torch.randn(16, 1)
    opt = torch.optim.LBFGS(model.parameters(), max_iter=4)
    calls = [0]
    total = [0]

    def closure():
        calls[0] += 1
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()  # closure forward
        loss.backward()  # closure backward
        assert model.weight.grad is not None  # closure grad read
        if leak:
            total[0] += loss  # planted in the closure
        return loss

    with gradviz.trace(engine="torch") as tr:
        for _ in range(steps):
            opt.step(closure)  # the LBFGS step
    return tr.to_dict(), calls[0], model


def test_lbfgs_closure_calls_are_graphs_backward_calls_and_grad_reads():
    doc, calls, _ = _lbfgs_run()
    assert calls >= 4  # several closure calls per step
    assert doc["internal_errors"] == []
    assert _backward_calls(doc) == calls
    assert {b["location"]["line"] for b in doc["backwards"]} == {_line_of("# closure backward")}
    forward = _line_of("# closure forward")
    graphs_at_forward = {n["graph"] for n in doc["nodes"] if (n.get("location") or {}).get("line") == forward}
    built = sum(s["count"] for s in doc["structures"])
    assert built == calls and len(graphs_at_forward) >= 1
    reads = [e for e in doc["events"] if e["kind"] == "grad_read"]
    assert reads and {e["location"]["line"] for e in reads} == {_line_of("# closure grad read")}
    steps = [e for e in doc["events"] if e["kind"] == "optimizer" and e["event"] == "step"]
    step_line = _line_of("# the LBFGS step")
    assert steps and {(e["optimizer"], e["location"]["line"]) for e in steps} == {("LBFGS", step_line)}
    # every parameter got its gradient inside the closure
    assert doc["diagnostics"] == []


def test_lbfgs_steps_still_change_the_parameters_as_untraced():
    _, _, traced_model = _lbfgs_run()
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    x, y = torch.randn(16, 3), torch.randn(16, 1)
    opt = torch.optim.LBFGS(model.parameters(), max_iter=4)

    def closure():
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        return loss

    for _ in range(2):
        opt.step(closure)
    assert torch.equal(model.weight, traced_model.weight) and torch.equal(model.bias, traced_model.bias)


def test_a_mistake_planted_in_the_lbfgs_closure_is_named_at_its_line():
    doc, calls, _ = _lbfgs_run(leak=True)
    assert ("retained-graph", _line_of("# planted in the closure")) in _codes(doc)
    assert _backward_calls(doc) == calls


def test_a_parameter_update_between_closure_calls_is_seen_by_a_graph_that_saved_it():
    """LBFGS writes the parameters between its closure calls: a graph kept with retain_graph from the first call
    is stale in the second, and the write is the step's, at the step's line."""
    doc = lbfgs_keeping_the_first_calls_graph(torch, "torch")
    step_line = marked_line(CASES, "# LBFGS writes w between calls")
    updates = [e for e in doc["events"] if e["kind"] == "inplace" and e.get("op") == "LBFGS.step"]
    assert [e["location"]["line"] for e in updates] == [step_line]
    assert ("stale-version", step_line) in _codes(doc)
    failed = [b for b in doc["backwards"] if b.get("error")]
    assert [b["location"]["line"] for b in failed] == [marked_line(CASES, "# the first call's graph, in the second")]


class SAM(torch.optim.Optimizer):
    """Sharpness-aware minimisation, as its papers' code does it: ``step(closure)`` moves the weights up the
    gradient, calls the closure for a second forward and backward there, moves back and steps the base
    optimizer (a step inside the step)."""

    def __init__(self, params, rho=0.05, lr=0.1):
        super().__init__(params, dict(rho=rho))
        self.base = torch.optim.SGD(self.param_groups, lr=lr)

    @torch.no_grad()
    def step(self, closure):
        for group in self.param_groups:
            norm = torch.norm(torch.stack([p.grad.norm() for p in group["params"]]))
            for p in group["params"]:
                e = p.grad * group["rho"] / (norm + 1e-12)
                p.add_(e)
                self.state[p]["e"] = e
        with torch.enable_grad():
            closure()
        for group in self.param_groups:
            for p in group["params"]:
                p.sub_(self.state[p]["e"])
        self.base.step()


def _sam_run():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    x, y = torch.randn(8, 4), torch.randn(8, 1)
    opt = SAM(model.parameters())

    def closure():
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()  # SAM second pass
        loss.backward()
        return loss

    with gradviz.trace(engine="torch") as tr:
        for _ in range(3):
            opt.zero_grad()
            loss = ((model(x) - y) ** 2).mean()  # SAM first pass
            loss.backward()
            opt.step(closure)  # the SAM step
    return tr.to_dict(), model


def test_a_sam_step_shows_both_passes_and_one_step_per_iteration():
    doc, model = _sam_run()
    assert doc["internal_errors"] == []
    first, second = _line_of("# SAM first pass"), _line_of("# SAM second pass")
    lines = [b["location"]["line"] for b in doc["backwards"]]
    assert lines == [first + 1, second + 1] * 3
    steps = [e for e in doc["events"] if e["kind"] == "optimizer" and e["event"] == "step"]
    assert [(e["optimizer"], e["location"]["line"]) for e in steps] == [("SAM", _line_of("# the SAM step"))] * 3
    assert all(len(e["parameters"]) == 4 for e in steps)
    assert doc["diagnostics"] == []
    assert all(p.grad is not None for p in model.parameters())


def test_a_mistake_planted_in_the_sam_closure_is_named_at_its_line():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    x, y = torch.randn(8, 4), torch.randn(8, 1)
    opt = SAM(model.parameters())

    def closure():
        opt.zero_grad()
        h = torch.sigmoid(model(x))
        h.mul_(2)  # in place on sigmoid's saved output
        loss = ((h - y) ** 2).mean()
        loss.backward()
        return loss

    with gradviz.trace(engine="torch") as tr:
        ((model(x) - y) ** 2).mean().backward()
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            opt.step(closure)
        after = torch.ones(2, requires_grad=True)
        (after * 3).sum().backward()  # traced after the failed step
    doc = tr.to_dict()
    assert ("stale-version", _line_of("# in place on sigmoid's saved output")) in _codes(doc)
    # the step raised inside its closure: the thread is observed again afterwards
    assert doc["backwards"][-1]["location"]["line"] == _line_of("# traced after the failed step")


def _sgd_closure_loop(lib, engine):
    """The same ``step(closure)`` loop on gradviz's engine (``lib`` = gradviz) and on PyTorch."""
    lib.manual_seed(0)
    model = lib.nn.Linear(3, 1)
    x, y = lib.randn(16, 3), lib.randn(16, 1)
    opt = lib.optim.SGD(model.parameters(), lr=0.1)
    total = [0]

    def closure():
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()  # both engines' forward
        loss.backward()
        assert model.weight.grad is not None  # both engines' grad read
        total[0] += loss  # both engines' planted total
        return loss

    with gradviz.trace(engine=engine) as tr:
        for _ in range(4):
            opt.step(closure)  # both engines' step
    return tr.to_dict()


def test_gradviz_engine_and_pytorch_see_the_same_closure_loop():
    ours, theirs = _sgd_closure_loop(gradviz, "gradviz"), _sgd_closure_loop(torch, "torch")

    def facts(doc):
        events = [(e["kind"], e.get("event"), e["iteration"], e["location"]["line"]) for e in doc["events"]
                  if e["kind"] in ("optimizer", "grad_read")]
        return events, _backward_calls(doc), sum(s["count"] for s in doc["structures"]), _codes(doc)

    assert facts(ours) == facts(theirs)
    events, backwards, _, codes = facts(theirs)
    assert backwards == 4 and codes == [("retained-graph", _line_of("# both engines' planted total"))]
    step = _line_of("# both engines' step")
    assert [e for e in events if e[1] == "step"] and {e[3] for e in events if e[1] == "step"} == {step}


def test_a_step_made_inside_a_closure_is_a_step_of_its_own():
    torch.manual_seed(0)
    a, b = torch.nn.Linear(3, 1), torch.nn.Linear(3, 1)
    x = torch.randn(4, 3)
    outer, inner = torch.optim.SGD(a.parameters(), lr=0.1), torch.optim.Adam(b.parameters(), lr=0.1)

    def closure():
        outer.zero_grad()
        inner.zero_grad()
        loss = (a(x) + b(x)).pow(2).mean()
        loss.backward()
        inner.step()  # a step inside the closure
        after = b(x).sum()  # traced after the inner step
        return loss + 0 * after

    with gradviz.trace(engine="torch") as tr:
        outer.step(closure)  # the outer step
        b(x).sum().backward()  # traced after both steps
    doc = tr.to_dict()
    assert doc["internal_errors"] == []
    steps = [(e["optimizer"], e["location"]["line"]) for e in doc["events"]
             if e["kind"] == "optimizer" and e["event"] == "step"]
    assert steps == [("Adam", _line_of("# a step inside the closure")), ("SGD", _line_of("# the outer step"))]
    lines = {n["location"]["line"] for n in doc["nodes"] if n.get("location")}
    assert {_line_of("# traced after the inner step"), _line_of("# traced after both steps")} <= lines


class Refusing(torch.optim.SGD):
    """A step that raises after torch's step hooks ran (a check of the optimizer's own, a NaN guard)."""

    def step(self, closure=None):
        if getattr(self, "refuse", False):
            raise ValueError("refused")
        return super().step(closure)


def test_a_step_that_raised_outside_its_closure_leaves_the_thread_observed():
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    x = torch.randn(4, 3)
    opt = Refusing(model.parameters(), lr=0.1)
    with gradviz.trace(engine="torch") as tr:
        opt.refuse = True
        model(x).sum().backward()
        with pytest.raises(ValueError, match="refused"):
            opt.step()
        opt.refuse = False
        opt.zero_grad()
        model(x).sum().backward()  # traced after the refused step
        opt.step()  # the step after the refused one
    doc = tr.to_dict()
    assert [b["location"]["line"] for b in doc["backwards"]][-1] == _line_of("# traced after the refused step")
    steps = [e["location"]["line"] for e in doc["events"] if e["kind"] == "optimizer" and e["event"] == "step"]
    assert steps == [_line_of("# the step after the refused one")]
