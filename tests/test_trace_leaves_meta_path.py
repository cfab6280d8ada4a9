"""A light trace puts an import counter first on ``sys.meta_path`` (the ``out=`` wrappers' key, torch/watch.py);
it leaves with the trace, whichever way the trace ends."""

import sys

import pytest

import gradviz

torch = pytest.importorskip("torch")


def _loop(steps):
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(4, 3)
    on_path = []
    for _ in range(steps):
        opt.zero_grad()
        model(x).pow(2).sum().backward()
        opt.step()
        on_path.append(len(sys.meta_path))
    return on_path


def test_the_import_counter_is_on_the_path_while_light_and_gone_after_the_trace():
    before = list(sys.meta_path)
    with gradviz.trace(engine="torch", light=True, trace_steps=(1, 1)):
        on_path = _loop(6)
    assert max(on_path) == len(before) + 1  # the light iterations' key counted imports
    assert sys.meta_path == before


def test_the_import_counter_goes_when_the_traced_code_raises():
    before = list(sys.meta_path)
    with pytest.raises(RuntimeError, match="the script failed"):
        with gradviz.trace(engine="torch", light=True, trace_steps=(1, 1)):
            _loop(6)
            raise RuntimeError("the script failed")
    assert sys.meta_path == before


def test_two_traces_one_after_the_other_leave_the_path_as_it_was():
    before = list(sys.meta_path)
    for _ in range(2):
        with gradviz.trace(engine="torch", light=True, trace_steps=(1, 1)):
            _loop(4)
        assert sys.meta_path == before
