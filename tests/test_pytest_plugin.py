"""gradviz's pytest plugin (the ``pytest11`` entry point): real pytest runs of small test files through
``pytester``, asserting on the summary's text and the outcomes. Each planted mistake happens in a test's one
and only iteration, and the plugin records every op by default (``light`` is off unless --gradviz-light)."""

import json
import os
import pathlib

import pytest

# numpy loaded out here: pytester's in-process runs drop the modules they import, and numpy cannot be imported
# twice in one process
import gradviz.nn  # noqa: F401
import gradviz.tracing  # noqa: F401

pytest_plugins = ["pytester"]

TESTS = '''
import gradviz as torch
import gradviz.nn as nn


def test_reads_a_non_leaf_grad():
    w = torch.randn(3, requires_grad=True) * 0.1
    (w * 2).sum().backward()
    assert w.grad is None  # planted: none-grad


def test_changes_a_saved_value_through_data():
    layer = nn.Linear(6, 8)
    gate = torch.sigmoid(layer(torch.randn(16, 6)))
    gate.data[gate.data < 0.5] = 0  # planted: silent-inplace
    gate.sum().backward()


def test_clean():
    w = torch.randn(3, requires_grad=True)
    (w * 2).sum().backward()
    assert w.grad is not None
'''


def line_of(text, marker):
    """The line of ``marker`` in the file ``makepyfile`` writes from ``text`` (it drops the leading newline)."""
    return next(n for n, line in enumerate(text.strip("\n").splitlines(), 1) if marker in line)


@pytest.fixture
def suite(pytester):
    pytester.makepyfile(test_training=TESTS)
    return pytester


def test_the_plugin_is_registered_through_its_entry_point():
    from importlib.metadata import entry_points

    (entry,) = [e for e in entry_points(group="pytest11") if e.name == "gradviz"]
    assert entry.value == "gradviz.pytest_plugin"


def test_gradviz_reports_each_tests_diagnostics_in_the_summary(suite):
    result = suite.runpytest("--gradviz", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)
    none_line, data_line = line_of(TESTS, "# planted: none-grad"), line_of(TESTS, "# planted: silent-inplace")
    result.stdout.re_match_lines([
        r"=+ gradviz diagnostics =+",
        rf"test_training.py::test_reads_a_non_leaf_grad: none-grad \(warning\) at .*test_training.py:{none_line}: "
        r"`w.grad` is None.*",
        rf"test_training.py::test_changes_a_saved_value_through_data: silent-inplace \(error\) at "
        rf".*test_training.py:{data_line}: .*",
        r"gradviz: 2 diagnostics in 2 tests",
    ])
    assert "test_clean:" not in result.stdout.str()


def test_gradviz_fail_on_error_fails_the_test_with_an_error(suite):
    result = suite.runpytest("--gradviz-fail-on", "error", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines([
        "*DiagnosticsFailed: gradviz: 1 diagnostic at or above `error`:",
        f"*silent-inplace (error) at *test_training.py:{line_of(TESTS, '# planted: silent-inplace')}: *",
        "FAILED test_training.py::test_changes_a_saved_value_through_data - *",
    ])


def test_gradviz_fail_on_warning_fails_the_warning_too(suite):
    result = suite.runpytest("--gradviz-fail-on", "warning", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(["FAILED test_training.py::test_reads_a_non_leaf_grad - *"])


def test_without_the_option_nothing_is_traced_or_said(suite):
    result = suite.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)
    assert "gradviz diagnostics" not in result.stdout.str() and "gradviz:" not in result.stdout.str()


def test_a_clean_suite_says_so(pytester):
    header, clean = TESTS.split("def test_reads")[0], TESTS.split("def test_clean")[1]
    pytester.makepyfile(test_clean=header + "def test_clean" + clean)
    result = pytester.runpytest("--gradviz-fail-on", "error", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*= gradviz diagnostics =*", "gradviz: no diagnostics"])


def test_gradviz_out_writes_each_diagnosed_tests_report(suite):
    result = suite.runpytest("--gradviz", "--gradviz-out", "reports", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)
    folders = sorted(p.name for p in (suite.path / "reports").iterdir())
    assert folders == ["test_training.py_test_changes_a_saved_value_through_data",
                       "test_training.py_test_reads_a_non_leaf_grad"]
    doc = json.loads((suite.path / "reports" / folders[1] / "report.json").read_text())
    assert [d["code"] for d in doc["diagnostics"]] == ["none-grad"]
    assert (suite.path / "reports" / folders[1] / "report.html").exists()


FIXTURE_TESTS = '''
import pytest
import gradviz as torch


def test_explicit_trace_fails_on_an_error(gradviz_trace):
    x = torch.randn(4, requires_grad=True)
    with gradviz_trace:
        s = torch.sigmoid(x)
        s.data[s.data < 0.5] = 0  # planted in the block
        s.sum().backward()
    print("not reached")


def test_explicit_trace_with_fail_on_never_lists_what_it_found(gradviz_trace):
    with gradviz_trace(fail_on="never"):
        w = torch.randn(3, requires_grad=True) * 0.1
        (w * 2).sum().backward()
        w.grad  # a none-grad warning
    assert [d["code"] for d in gradviz_trace.diagnostics] == ["none-grad"]


def test_explicit_trace_of_a_clean_step(gradviz_trace):
    with gradviz_trace as tr:
        w = torch.randn(3, requires_grad=True)
        (w * 2).sum().backward()
    assert gradviz_trace.diagnostics == [] and tr.to_dict()["backwards"]


def test_outside_the_block_nothing_is_traced(gradviz_trace):
    w = torch.randn(3, requires_grad=True) * 0.1
    (w * 2).sum().backward()
    w.grad
    with gradviz_trace:
        pass
    assert gradviz_trace.diagnostics == []
'''


def test_the_gradviz_trace_fixture(pytester):
    pytester.makepyfile(test_fixture=FIXTURE_TESTS)
    result = pytester.runpytest("-p", "no:cacheprovider", "-rA")
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines([
        "*DiagnosticsFailed: gradviz: 1 diagnostic at or above `error`:",
        f"*silent-inplace (error) at *test_fixture.py:{line_of(FIXTURE_TESTS, '# planted in the block')}: *",
        "FAILED test_fixture.py::test_explicit_trace_fails_on_an_error - *",
    ])
    assert "not reached" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*= gradviz diagnostics =*",
                                 "test_fixture.py::test_explicit_trace_with_fail_on_never_lists_what_it_found: "
                                 "none-grad (warning)*"])


def test_a_bad_fail_on_in_the_fixture_is_one_line(pytester):
    pytester.makepyfile(test_bad='''
def test_bad(gradviz_trace):
    with gradviz_trace(fail_on="errors"):
        pass
''')
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["E *ValueError: gradviz_trace: fail_on must be one of error, warning, never, got "
                                 "'errors'", "test_bad.py:2: ValueError"])  # the test's line, not the plugin's


def test_the_plugin_loads_nothing_heavy():
    """Every pytest run of a project with gradviz installed imports the plugin: it must not bring numpy or torch."""
    import subprocess
    import sys

    code = "import sys, gradviz.pytest_plugin; print(sorted({'numpy', 'torch'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "[]", out.stderr


def test_pytest_rewrites_the_asserts_of_test_files_and_the_plugin_not_of_gradviz(pytester, monkeypatch):
    """pytest marks a plugin's whole distribution for assert rewriting: with the mark kept, every run (of any
    project with gradviz installed) rewrites gradviz's hundreds of modules, and again on every run where bytecode
    is not cached. pytest's rewriter finds a module only on ``sys.path``, as a regular install puts gradviz (an
    editable install's finder hides it from the rewriter): so the subprocess finds gradviz there."""
    root = pathlib.Path(gradviz.__file__).resolve().parents[1]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])))
    pytester.makepyfile(test_loaders='''
import sys
from _pytest.assertion.rewrite import AssertionRewritingHook

import gradviz.tracing


def rewritten(name):
    return isinstance(sys.modules[name].__loader__, AssertionRewritingHook)


def test_loaders():
    print("REWRITTEN", rewritten(__name__), rewritten("gradviz.pytest_plugin"), rewritten("gradviz.tracing"))
''')
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s")  # a fresh process: nothing imported yet
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*REWRITTEN True True False*"])


def test_the_gradviz_skip_marker_leaves_a_test_untraced(pytester):
    pytester.makepyfile(test_marked='''
import pytest
import gradviz as torch


@pytest.mark.gradviz_skip
def test_skipped_by_gradviz():
    w = torch.randn(3, requires_grad=True) * 0.1
    (w * 2).sum().backward()
    w.grad
''')
    result = pytester.runpytest("--gradviz-fail-on", "warning", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["gradviz: no diagnostics"])
