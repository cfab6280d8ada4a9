"""The tracer follows every .grad reset, accumulation and optimizer step, whatever the window keeps: a gradient
summed across steps in a dropped middle iteration is written on the step that uses it (``summed_grads``) and
reported by grad-accumulation."""

import inspect

import pytest

import gradviz

FORGET = 4  # the step whose zero_grad() is missing: the step after it sums two steps' gradients


def _loop(torch, trace):
    torch.manual_seed(0)
    w = torch.randn(3, requires_grad=True)
    opt = torch.optim.SGD([w], lr=0.1)
    x = torch.randn(3)
    lines = {}
    with trace(window=1) as tr:
        for it in range(10):
            if it != FORGET + 1:
                opt.zero_grad()
            (w * x).sum().backward(); lines["backward"] = inspect.currentframe().f_lineno  # noqa: E702
            opt.step(); lines["step"] = inspect.currentframe().f_lineno  # noqa: E702
    return tr.to_dict(), w, lines


def _check(doc, lines):
    assert doc["dropped"]["iterations"] > 0
    steps = [e for e in doc["events"] if e["kind"] == "optimizer" and e.get("summed_grads")]
    assert [e["iteration"] for e in steps] == [FORGET + 1]  # kept although out of the window
    (summed,) = steps[0]["summed_grads"]
    assert len(summed["parameters"]) == 1
    assert summed["backward_location"]["line"] == lines["backward"]
    assert summed["previous_step_location"]["line"] == lines["step"]
    found = [d for d in doc["diagnostics"] if d["code"] == "grad-accumulation"]
    assert len(found) == 1 and found[0]["location"]["line"] == lines["backward"]


def test_a_forgotten_zero_grad_in_a_dropped_iteration_is_reported():
    doc, _, lines = _loop(gradviz, gradviz.trace)
    _check(doc, lines)


@pytest.mark.oracle
def test_a_forgotten_zero_grad_in_a_dropped_iteration_is_reported_on_pytorch():
    torch = pytest.importorskip("torch")
    doc, _, lines = _loop(torch, lambda **kw: gradviz.trace(engine="torch", **kw))
    _check(doc, lines)


def test_a_loop_that_zeroes_every_step_has_no_summed_grads():
    torch = gradviz
    w = torch.randn(3, requires_grad=True)
    opt = torch.optim.SGD([w], lr=0.1)
    with gradviz.trace(window=1) as tr:
        for _ in range(6):
            opt.zero_grad()
            (w * 2).sum().backward()
            opt.step()
            w.grad.zero_()  # an in-place reset counts
            (w * 3).sum().backward()
            opt.step()
            w.grad = torch.zeros(3)  # and an assignment
            (w * 4).sum().backward()
            opt.step()
    doc = tr.to_dict()
    assert not [e for e in doc["events"] if e.get("summed_grads")]
    assert not [d for d in doc["diagnostics"] if d["code"] == "grad-accumulation"]
