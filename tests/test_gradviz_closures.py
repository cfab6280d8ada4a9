"""``optimizer.step(closure)`` on gradviz's own engine: LBFGS calls its closure several times per step, and each
call's forward, backward and the step's parameter writes between calls are traced like any other code."""

import os
from functools import partial

import numpy as np

import gradviz
import gradviz as torch  # the script as a PyTorch user writes it, on gradviz's engine

from . import closure_cases
from .closure_cases import lbfgs_keeping_the_first_calls_graph
from .marked_lines import marked_line

CASES = closure_cases.__file__

HERE = os.path.abspath(__file__)
_line_of = partial(marked_line, HERE)  # a line of this file, by its marker comment


def _lbfgs_run(traced=True, leak=False):
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    x, y = torch.randn(16, 3), torch.randn(16, 1)
    opt = torch.optim.LBFGS(model.parameters(), max_iter=4)
    calls, total = [0], [0]

    def closure():
        calls[0] += 1
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()  # closure backward
        if leak:
            total[0] += loss  # planted in the closure
        return loss

    tr = gradviz.trace(engine="gradviz") if traced else None
    if tr is not None:
        tr.__enter__()
    for _ in range(2):
        opt.step(closure)  # the LBFGS step
    if tr is not None:
        tr.__exit__(None, None, None)
    return (tr.to_dict() if tr else None), calls[0], model


def test_every_closure_call_is_a_traced_backward_and_the_steps_are_the_optimizers():
    doc, calls, _ = _lbfgs_run()
    assert calls == 8  # 4 iterations a step, each an evaluation, the first per step included
    kept, dropped = len(doc["backwards"]), (doc.get("dropped") or {}).get("backwards", 0)
    assert kept + dropped == calls
    assert {b["location"]["line"] for b in doc["backwards"]} == {_line_of("# closure backward")}
    steps = [e for e in doc["events"] if e["kind"] == "optimizer" and e["event"] == "step"]
    assert {(e["optimizer"], e["location"]["line"]) for e in steps} == {("LBFGS", _line_of("# the LBFGS step"))}
    assert doc["diagnostics"] == [] and doc["internal_errors"] == []


def test_tracing_does_not_change_what_lbfgs_computes():
    _, _, traced = _lbfgs_run()
    _, _, plain = _lbfgs_run(traced=False)
    np.testing.assert_array_equal(traced.weight.detach().numpy(), plain.weight.detach().numpy())
    np.testing.assert_array_equal(traced.bias.detach().numpy(), plain.bias.detach().numpy())


def test_a_mistake_planted_in_the_closure_is_named_at_its_line():
    doc, _, _ = _lbfgs_run(leak=True)
    assert ("retained-graph", _line_of("# planted in the closure")) in {
        (d["code"], d["location"]["line"]) for d in doc["diagnostics"]}


def test_a_graph_kept_from_the_first_call_is_stale_after_the_steps_write():
    doc = lbfgs_keeping_the_first_calls_graph(torch, "gradviz")
    failed = [b for b in doc["backwards"] if b.get("error")]
    assert [b["location"]["line"] for b in failed] == [marked_line(CASES, "# the first call's graph, in the second")]
    stale = [d for d in doc["diagnostics"] if d["code"] == "stale-version"]
    assert stale and stale[0]["location"]["line"] == marked_line(CASES, "# LBFGS writes w between calls")
