"""A PyTorch *feature* gradviz's engine lacks (``create_graph=True``, ``Tensor.half``...) stops ``gradviz run`` the
way a missing name does: one line naming it, and a report that says nothing after it was checked, never "nothing
suspicious was found"."""

import textwrap

import pytest
from click.testing import CliRunner

import gradviz
from gradviz.cli import main
from gradviz.errors import UnsupportedError


def run(tmp_path, body):
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(body))
    result = CliRunner(env={"COLUMNS": "200"}).invoke(
        main, ["run", "--torch", "--no-render", "--out", str(tmp_path / "out"), str(script)],
        catch_exceptions=False)
    return result, " ".join(result.stdout.split())


@pytest.mark.parametrize("line, feature, message", [
    ("(g,) = torch.autograd.grad(y, x, create_graph=True)", "create_graph=True",
     "gradviz does not support higher-order gradients (create_graph=True)"),
    ("y.backward(create_graph=True)", "create_graph=True",
     "gradviz does not support higher-order gradients (create_graph=True)"),
    ("y.backward(inputs=[x])", "backward(inputs=...)",
     "gradviz does not support backward(inputs=...); use autograd.grad instead"),
    ("h = x.half()", "Tensor.half", "gradviz supports float32 and float64, not float16 (Tensor.half)"),
    ("torch.nn.Linear(2, 2).half()", "torch.nn.Module.half",
     "gradviz supports float32 and float64, not float16 (Module.half)"),
    ("torch.optim.Adam([x], fused=True)", "fused=True", "gradviz's optimizers do not implement fused=True"),
])
def test_an_unsupported_feature_stops_the_run_in_one_line(tmp_path, line, feature, message):
    result, report = run(tmp_path, f"""\
        import torch
        x = torch.ones(2, requires_grad=True)
        y = (x * 2).sum()
        print("before", y.item())
        {line}
        print("after")
    """)
    assert result.exit_code == 1
    assert result.stdout.startswith("before 4.0\ngradviz: ") and "\nafter\n" not in result.stdout
    assert result.stderr == f"gradviz: error: {tmp_path / 'script.py'}:5: {message}\n"
    assert f"gradviz: no mistakes seen before the run stopped at {tmp_path / 'script.py'}:5: `{feature}` is not " \
           "supported by gradviz's engine; nothing after it was checked" in report
    assert "nothing suspicious" not in report


def test_the_feature_name_is_optional_and_the_error_class_unchanged():
    assert UnsupportedError("no").torch_name is None
    with pytest.raises(NotImplementedError, match=r"higher-order gradients") as caught:
        x = gradviz.ones(2, requires_grad=True)
        gradviz.autograd.grad((x * 2).sum(), x, create_graph=True)
    assert caught.value.torch_name == "create_graph=True"
