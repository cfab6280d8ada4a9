"""The light watch wraps the functions the user's files call with ``out=`` (``TorchWatch._out_wrappers``), and reads
those files again when the loaded modules change. A module replaced by another at the same ``sys.modules`` count
(a reload from another file) must be read too: its ``out=`` write on a saved value is named at its own line."""

import sys

import pytest

from tests.silent_bugs import found, line_of, run

PLAIN = """import torch


def halve(h):
    return h
"""

WITH_OUT = """import torch


def halve(h):
    with torch.no_grad():
        torch.mul(h, 0.5, out=h)  # MARK
    return h
"""

MAIN = """import importlib.util
import sys

import torch
import torch.nn as nn

import watch_out_helper

torch.manual_seed(0)
lin = nn.Linear(4, 4)
opt = torch.optim.SGD(lin.parameters(), lr=0.01)
x = torch.randn(8, 4)
for step in range(60):
    if step == 10:  # a light iteration: the module is replaced, sys.modules keeps its count
        count = len(sys.modules)
        spec = importlib.util.spec_from_file_location("watch_out_helper", {with_out!r})
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules["watch_out_helper"] = module
        assert len(sys.modules) == count
    opt.zero_grad()
    h = torch.sigmoid(lin(x))
    if step == 40:
        h = sys.modules["watch_out_helper"].halve(h)
    loss = h.sum()
    try:
        loss.backward()
    except RuntimeError:
        pass
    opt.step()
"""


@pytest.fixture
def no_helper_left():
    """The run is in this process: the script's module must not stay in sys.modules for other tests."""
    yield
    sys.modules.pop("watch_out_helper", None)


def test_an_out_write_in_a_module_replaced_at_the_same_count_is_named_at_its_line(tmp_path, no_helper_left):
    pytest.importorskip("torch")
    (tmp_path / "watch_out_helper.py").write_text(PLAIN)
    with_out = tmp_path / "helper_with_out.py"
    with_out.write_text(WITH_OUT)
    script = tmp_path / "train.py"
    script.write_text(MAIN.format(with_out=str(with_out)))
    doc = run(script, tmp_path / "out", "torch")
    assert doc["schedule"]["light_iterations"] > 30  # step 40 was light: the watch, not a full trace, saw it
    (stale,) = found(doc, "stale-version")
    assert stale["location"]["file"].endswith("helper_with_out.py")
    assert stale["location"]["line"] == line_of(with_out, "# MARK")
