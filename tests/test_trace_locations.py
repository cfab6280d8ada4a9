"""Where the tracer places things: the user's own frame, never an equal code object from another file, the
standard library or an installed package."""

import copy
import inspect
import runpy

import pytest

import gradviz
from gradviz import nn

_STEP = "import gradviz\n\n\ndef step(w):\n    return (w * 2).sum()\n"


def _node_files(doc, op):
    return {n["location"]["file"] for n in doc["nodes"] if n["op"] == op}


def test_identical_code_in_two_files_is_placed_in_each_file(tmp_path):
    """Code objects compare equal across files (co_filename is not part of equality): the location cache must
    not hand b.py's ops a.py's location."""
    w = gradviz.randn(3, requires_grad=True)
    files = []
    for name in ("a.py", "b.py"):
        path = tmp_path / name
        path.write_text(_STEP)
        step = runpy.run_path(str(path))["step"]
        with gradviz.trace() as tr:
            step(w)
        files.append(_node_files(tr.to_dict(), "MulBackward"))
    assert files == [{str(tmp_path / "a.py")}, {str(tmp_path / "b.py")}]


@pytest.mark.oracle
def test_identical_code_in_two_files_on_real_pytorch(tmp_path):
    torch = pytest.importorskip("torch")
    w = torch.randn(3, requires_grad=True)
    files = []
    for name in ("a.py", "b.py"):
        path = tmp_path / name
        path.write_text(_STEP.replace("import gradviz", "import torch"))
        step = runpy.run_path(str(path))["step"]
        with gradviz.trace(engine="torch") as tr:
            step(w)
        files.append(_node_files(tr.to_dict(), "MulBackward0"))
    assert files == [{str(tmp_path / "a.py")}, {str(tmp_path / "b.py")}]


def test_deep_copied_layer_is_placed_at_the_users_copy_line():
    layer = nn.Linear(2, 2)
    x = gradviz.randn(1, 2)
    with gradviz.trace() as tr:
        twin = copy.deepcopy(layer); line = inspect.currentframe().f_lineno  # noqa: E702
        twin(x).sum().backward()
    doc = tr.to_dict()
    made = [v for v in doc["variables"] if v["is_parameter"] and v["shape"] == [2, 2]]
    assert made, "the copy's weight is recorded"
    assert {(v["location"]["file"], v["location"]["line"]) for v in made} == {(__file__, line)}
