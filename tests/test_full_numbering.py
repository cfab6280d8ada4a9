"""One iteration numbering in both modes (issue 23): with an optimizer, an iteration ends at its step, so a
gradient-accumulation loop of 4 backward calls per step counts its steps under --full exactly as the light default
does, on both engines; a loop with no optimizer counts its backward calls in both."""

import pytest

import gradviz

MICRO, STEPS = 4, 6


def _engine(name):
    if name == "torch":
        return pytest.importorskip("torch"), "torch"
    return gradviz, "gradviz"


def _accumulating(torch, engine, light, optimizer=True):
    torch.manual_seed(0)
    w = torch.randn(4, 1, requires_grad=True)
    x = torch.randn(8, 4)
    with gradviz.trace(engine=engine, light=light) as tr:
        opt = torch.optim.SGD([w], lr=0.1) if optimizer else None  # made in the trace, as in a traced script
        for _ in range(STEPS):
            if opt is not None:
                opt.zero_grad()
            for micro in range(MICRO):
                loss = (x[micro * 2:micro * 2 + 2] @ w).pow(2).mean() / MICRO
                loss.backward()
            if opt is not None:
                opt.step()
            else:
                with torch.no_grad():
                    w -= 0.1 * w.grad
                w.grad = None
    return tr.to_dict()


@pytest.mark.parametrize("engine", ["torch", "gradviz"])
def test_full_counts_a_gradient_accumulation_loop_by_its_optimizer_steps(engine):
    torch, name = _engine(engine)
    full, light = _accumulating(torch, name, light=False), _accumulating(torch, name, light=True)
    assert full["iterations"] == light["iterations"] == STEPS
    # the first and last window of iterations kept, MICRO backward calls in each, numbered as the light run's
    assert [b["iteration"] for b in full["backwards"]] == [i for i in (0, 1, 2, 3, 4, 5) for _ in range(MICRO)]
    assert [b["iteration"] for b in light["backwards"]] == [i for i in (0, 1, 2) for _ in range(MICRO)]
    steps = [e["iteration"] for e in full["events"] if e.get("kind") == "optimizer" and e["event"] == "step"]
    assert steps == list(range(STEPS))


@pytest.mark.parametrize("engine", ["torch", "gradviz"])
def test_full_counts_each_backward_of_a_loop_without_an_optimizer(engine):
    torch, name = _engine(engine)
    full = _accumulating(torch, name, light=False, optimizer=False)
    assert full["iterations"] == STEPS * MICRO
    assert [b["iteration"] for b in full["backwards"]] == [0, 1, 2, 21, 22, 23]  # the first and last window
