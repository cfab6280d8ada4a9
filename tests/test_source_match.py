"""source_match: the line that calls an op by name, for a light iteration's NaN/Inf whose ops were not recorded."""

import textwrap

from gradviz.tracing.source_match import line_calling

SCRIPT = textwrap.dedent("""\
    import torch.nn.functional as F
    for step in range(10):
        loss = F.mse_loss(model(x), y)
        loss.backward()
    print(F.mse_loss(model(test_x), test_y))
""")


def test_one_line_calling_the_op_by_name_is_its_line(tmp_path):
    path = tmp_path / "one.py"
    path.write_text("import torch\ny = torch.sqrt(x)\nz = y + 1\n")
    found = line_calling("SqrtBackward0", str(path))
    assert (found.line, found.function) == (2, "<module>")


def test_several_lines_leave_it_unknown_unless_one_is_in_the_loop_around_the_backward(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(SCRIPT)
    assert line_calling("MseLossBackward0", str(path)) is None  # two lines call mse_loss: no guess
    assert line_calling("MseLossBackward0", str(path), near=4).line == 3  # the loop's one, not the evaluation's
    assert line_calling("MseLossBackward0", str(path), near=5) is None  # outside any loop: still two


def test_an_operator_is_never_guessed(tmp_path):
    path = tmp_path / "op.py"
    path.write_text("for i in range(3):\n    r = (z * z - s) ** 0.5\n    r.mean().backward()\n")
    assert line_calling("PowBackward0", str(path), near=3) is None
