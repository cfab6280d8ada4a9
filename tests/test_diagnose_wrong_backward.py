"""wrong-backward end to end: a custom Function's backward is checked the first time it runs with an input
signature, reported at the apply line with the class, the input, the backward's line and the error size; a
correct one is never flagged; the check changes nothing the script computes, prints or records."""

import contextlib
import io
import json
import runpy
from pathlib import Path

import numpy as np
import pytest

import gradviz
import gradviz as torch
from gradviz.autograd import Function
from gradviz.tracing import checks

SAMPLE = Path(__file__).resolve().parent.parent / "samples" / "wrong_backward_legendre.py"


def _line(needle, path=__file__):
    return next(i for i, text in enumerate(Path(path).read_text().splitlines(), 1) if needle in text)


class Square(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x  # wrong: d(x^2)/dx = 2x


class GoodSquare(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 2 * x


def _run(fn_class, steps=3, check_backward=True, shapes=((4,),)):
    torch.manual_seed(0)
    values = []
    with gradviz.trace(check_backward=check_backward) as tr:
        for _ in range(steps):
            for shape in shapes:
                x = torch.randn(*shape, requires_grad=True)
                y = fn_class.apply(x).sum()  # the apply line
                y.backward()
                values.append((y.item(), x.grad.numpy().copy()))
    return tr.to_dict(), values


def test_reported_at_the_apply_line_with_class_input_definition_and_size():
    doc, _ = _run(Square)
    (diag,) = [d for d in doc["diagnostics"] if d["code"] == "wrong-backward"]
    assert diag["severity"] == "error"
    assert diag["location"]["line"] == _line("y = fn_class.apply(x).sum()  # the apply line")
    assert diag["message"].startswith("`Square.backward` is wrong: its gradient for input 0 (`x`) disagrees")
    assert "relative error 0.5:" in diag["message"]  # half the true slope along any direction
    assert f"test_diagnose_wrong_backward.py:{_line('def backward(ctx, grad):')})" in diag["hint"]
    check = doc["backward_checks"]["checks"][0]
    assert check["node"] in diag["nodes"]
    assert doc["nodes"][[n["id"] for n in doc["nodes"]].index(check["node"])]["class_name"] == "Square"
    assert check["backward_location"]["line"] == _line("def backward(ctx, grad):")
    assert check["signature"] == ["float32[4] requires_grad"]


def test_a_correct_backward_is_clean():
    doc, _ = _run(GoodSquare)
    assert doc["diagnostics"] == []
    assert [c["status"] for c in doc["backward_checks"]["checks"]] == ["passed"]


def test_checked_once_per_signature_and_counted():
    doc, _ = _run(GoodSquare, steps=4, shapes=((4,), (2, 3)))
    section = doc["backward_checks"]
    assert [c["signature"] for c in section["checks"]] == [["float32[4] requires_grad"],
                                                           ["float32[2, 3] requires_grad"]]
    assert section["repeats"] == 6 and section["over_budget"] == 0


def test_budget(monkeypatch):
    monkeypatch.setattr(checks, "BUDGET", 1)
    doc, _ = _run(GoodSquare, steps=1, shapes=((4,), (2, 3), (5,)))
    section = doc["backward_checks"]
    assert len(section["checks"]) == 1 and section["over_budget"] == 2 and section["budget"] == 1


def test_off_switch():
    doc, _ = _run(Square, check_backward=False)
    assert doc["diagnostics"] == [] and doc["backward_checks"]["checks"] == []
    assert doc["backward_checks"]["enabled"] is False


def test_the_check_changes_no_value_and_no_record():
    with_check, values_on = _run(Square)
    without, values_off = _run(Square, check_backward=False)
    for (y1, g1), (y2, g2) in zip(values_on, values_off):
        assert y1 == y2
        np.testing.assert_array_equal(g1, g2)
    for key in ("nodes", "variables", "graphs", "backwards", "memory"):
        assert with_check[key] == without[key], key


def test_sample_through_gradviz_run_output_unchanged(tmp_path):
    """In this process (the CLI's own entry, as ``gradviz run`` calls it, and the sample as ``python`` runs it):
    three fresh interpreters would cost more than the sample itself."""
    from click.testing import CliRunner

    from gradviz.cli import main

    def run(*options):
        return CliRunner().invoke(main, ["run", *options, "--no-render", "--fail-on", "never", "--out",
                                         str(tmp_path / "o"), str(SAMPLE)], catch_exceptions=False)

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        runpy.run_path(str(SAMPLE), run_name="__main__")
    plain = printed.getvalue()
    checked = run()
    assert checked.exit_code == 0, checked.stderr
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    (diag,) = report["diagnostics"]
    assert diag["code"] == "wrong-backward"
    assert diag["location"]["line"] == _line("LegendrePolynomial3.apply(", SAMPLE)
    assert "input 0 (`x`)" in diag["message"]
    assert f"wrong_backward_legendre.py:{_line('def backward', SAMPLE)})" in diag["hint"]
    unchecked = run("--no-check-backward")
    assert plain.splitlines() == checked.stdout.splitlines()[:2] == unchecked.stdout.splitlines()[:2]
    assert json.loads((tmp_path / "o" / "report.json").read_text())["diagnostics"] == []


def test_fixed_sample_is_clean(tmp_path):
    fixed = tmp_path / "legendre_fixed.py"
    fixed.write_text(SAMPLE.read_text().replace("(5 * x ** 2 - 3)  # the mistake", "(5 * x ** 2 - 1)  # fixed"))
    with gradviz.trace() as tr:
        exec(compile(fixed.read_text(), str(fixed), "exec"), {"__name__": "__main__"})
    doc = tr.to_dict()
    assert doc["diagnostics"] == []
    assert [c["status"] for c in doc["backward_checks"]["checks"]] == ["passed"]


@pytest.mark.parametrize("code", ["wrong-backward"])
def test_explained(code):
    text = gradviz.explain(code)
    assert text.startswith("wrong-backward (error):") and "gradcheck" in text and "--no-check-backward" in text
