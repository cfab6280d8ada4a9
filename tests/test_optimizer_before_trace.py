"""An optimizer built before ``gradviz.trace()`` starts is recognised, on both engines: the iterations are
numbered by its steps as when it is built inside the trace, and the training rules that read the optimizers'
records see it (adapters/optimizer_watch.py: adopted when the entering frame names it, or at its first
``zero_grad`` / ``step``)."""

import pytest

import gradviz

ENGINES = ["gradviz", "torch"]


def _engine(name):
    return pytest.importorskip("torch") if name == "torch" else gradviz


def _accumulating(torch, engine, where):
    """Four backward calls per step, the step and zero_grad after them: 6 steps. ``where``: "inside" (built
    under the trace), "named" (built before, a local of this frame), "held" (built before, reached only
    through a dict)."""
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    opt = None if where == "inside" else torch.optim.SGD(model.parameters(), lr=0.1)
    held = {"opt": opt}
    if where == "held":
        del opt
    with gradviz.trace(engine=engine) as tr:
        if where == "inside":
            held["opt"] = torch.optim.SGD(model.parameters(), lr=0.1)
        for i in range(24):
            loss = model(torch.randn(2, 3)).sum() / 4
            loss.backward()
            if i % 4 == 3:
                held["opt"].step()
                held["opt"].zero_grad()
    return tr.to_dict()


def _numbering(doc):
    return [g["iteration"] for g in doc["graphs"]], len(doc["memory"]["series"])


@pytest.mark.parametrize("engine", ENGINES)
def test_an_optimizer_built_before_the_trace_numbers_the_iterations_by_its_steps(engine):
    torch = _engine(engine)
    inside = _accumulating(torch, engine, "inside")
    named = _accumulating(torch, engine, "named")
    graphs, iterations = _numbering(named)
    assert max(graphs) < 6  # numbered by the 6 steps, not by the backward calls held then let go (7, 8)
    assert (graphs, iterations) == _numbering(inside)
    built = named["training"]["optimizers"]
    assert [(o["class"], o["location"]) for o in built] == [("SGD", None)]  # built before: no line
    assert built[0]["param_groups"] == inside["training"]["optimizers"][0]["param_groups"]


def _zero_grad_first(torch, engine, held):
    """zero_grad, backward, step: 5 steps; the optimizer built before the trace, named by this frame or (``held``)
    reached only through a dict."""
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    box = {"opt": torch.optim.SGD(model.parameters(), lr=0.1)}
    opt = None if held else box["opt"]
    with gradviz.trace(engine=engine) as tr:
        for _ in range(5):
            box["opt"].zero_grad()
            model(torch.randn(2, 3)).sum().backward()
            box["opt"].step()
    del opt
    return tr.to_dict()


@pytest.mark.parametrize("engine", ENGINES)
def test_an_optimizer_the_frame_does_not_name_is_adopted_at_its_first_zero_grad(engine):
    torch = _engine(engine)
    held, named = _zero_grad_first(torch, engine, True), _zero_grad_first(torch, engine, False)
    assert [(o["class"], o["location"], o["iteration"]) for o in held["training"]["optimizers"]] == \
        [("SGD", None, 0)]
    assert _numbering(held) == _numbering(named)


def _head_replaced(torch, engine):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with gradviz.trace(engine=engine) as tr:
        model[2] = torch.nn.Linear(4, 2)  # made after the optimizer: never trained
        for _ in range(3):
            opt.zero_grad()
            model(torch.randn(5, 3)).sum().backward()
            opt.step()
    return tr.to_dict()


@pytest.mark.parametrize("engine", ENGINES)
def test_param_not_in_optimizer_sees_an_optimizer_built_before_the_trace(engine):
    doc = _head_replaced(_engine(engine), engine)
    found = [d for d in doc["diagnostics"] if d["code"] == "param-not-in-optimizer"]
    assert len(found) == 1
    assert found[0]["location"]["text"] == "model[2] = torch.nn.Linear(4, 2)  # made after the optimizer: never trained"
