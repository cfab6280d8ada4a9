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


def test_both_engines_place_facts_by_one_rule_of_what_is_internal(tmp_path):
    """One walk, one cache (tracing/frames.py): a folder the torch adapter adds as torch's is internal for every
    walk, and torch.fx's generated code is never the user's."""
    from gradviz.tracing import frames
    from gradviz.tracing.adapters.torch import frames as torch_frames

    assert torch_frames.is_internal is frames.is_internal
    vendored = tmp_path / "vendored_torch"
    vendored.mkdir()
    path = vendored / "ops.py"
    path.write_text("def op():\n    pass\n")
    code = compile(path.read_text(), str(path), "exec")
    user = compile("x = 1\n", str(tmp_path / "train.py"), "exec")
    assert not frames.is_internal(code) and not frames.is_internal(user)
    old = frames._internal_dirs
    try:
        torch_frames.set_torch_dir(str(vendored))
        assert frames.is_internal(code) and not frames.is_internal(user)
    finally:
        frames._internal_dirs = old
        frames._internal.clear()
    assert frames.is_internal(compile("y = 2\n", "<eval_with_key>.3", "exec"))
    assert not frames.is_internal(compile("y = 2\n", "<string>", "exec"))


def test_the_torch_adapters_user_frame_counts_from_its_caller():
    from gradviz.tracing.adapters.torch import frames as torch_frames

    def inner():
        return torch_frames.user_frame(0)

    assert inner().f_code is inner.__code__
    assert torch_frames.user_frame(0).f_code.co_name == "test_the_torch_adapters_user_frame_counts_from_its_caller"
