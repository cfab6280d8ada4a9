"""tests/conftest.py's groups, read off test ids, still name the tests that share a run: a renamed test or a new
user of a shared fixture would otherwise leave the group silently (the suite slower, nothing failing)."""

import inspect
import os
import re
from pathlib import Path

import pytest

from tests import conftest

torch = pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parent.parent

from tests import (  # noqa: E402
    test_ddp_torch,
    test_distributed,
    test_light_sees_everything,
    test_torch_exact_memory,
    test_torch_parity,
    test_torch_scripts,
    test_torchrun_terminal,
)


def _id(module, test, param=None):
    """The id pytest gives ``test`` of ``module`` (with ``param``, the id of its parameters)."""
    name = f"tests/{module.__name__.rsplit('.', 1)[1]}.py::{test.__name__}"
    return name if param is None else f"{name}[{param}]"


def _tests(module):
    return [f for name, f in vars(module).items() if name.startswith("test_") and inspect.isfunction(f)]


def _taking(module, fixture):
    return {f.__name__ for f in _tests(module) if fixture in inspect.signature(f).parameters}


def test_a_samples_full_trace_tests_are_one_group_on_each_sample():
    samples = [name for name, _ in test_torch_parity._samples()]
    assert samples == [name for name, _ in test_torch_exact_memory._samples()] and len(samples) > 50
    for name in samples:
        ids = [_id(test_torch_parity, test_torch_parity.test_samples_give_the_same_diagnostics_on_both_engines, name),
               _id(test_torch_exact_memory,
                   test_torch_exact_memory.test_samples_give_the_same_diagnostics_as_the_default_mode, name)]
        assert [conftest.group_of(i) for i in ids] == [f"sample {name}"] * 2
    light = test_light_sees_everything.test_every_light_iteration_names_what_a_full_trace_names
    shared = 0
    for script, engine in test_light_sees_everything._corpus():
        group = conftest.group_of(_id(test_light_sees_everything, light, f"{script}-{engine}"))
        if script.startswith("samples/") and engine == "torch":  # the one made by default_torch_trace
            assert group == f"sample {os.path.basename(script)}" and os.path.basename(script) in samples
            shared += 1
        else:
            assert group is None, script
    assert shared > 40
    # other tests of those files go out alone
    scenarios = test_torch_parity.test_diagnostic_scenarios_give_the_same_diagnostics_on_both_engines
    assert conftest.group_of(_id(test_torch_parity, scenarios, "x")) is None


def test_the_tests_of_a_shared_module_fixture_are_one_group_and_no_other():
    for module, fixtures in ((test_ddp_torch, ("two", "four")), (test_distributed, ("clean_pair",)),
                             (test_torchrun_terminal, ("default_run",))):
        users = set().union(*(_taking(module, f) for f in fixtures))
        assert users
        groups = {f.__name__: conftest.group_of(_id(module, f)) for f in _tests(module)}
        assert len({groups[name] for name in users}) == 1 and None not in {groups[name] for name in users}
        # test_ddp_torch's fixtures are reached through request.getfixturevalue too: the whole file is one group
        others = {name: g for name, g in groups.items() if name not in users}
        if module is test_ddp_torch:
            assert set(others.values()) <= {groups[next(iter(users))]}
        else:
            assert set(others.values()) == {None}, others


def test_the_torch_scripts_corpus_tests_are_one_group():
    cases = sorted(test_torch_scripts.CASES)
    corpus = [_id(test_torch_scripts, test_torch_scripts.test_script_prints_what_pytorch_prints, n) for n in cases]
    gradviz_runs = [_id(test_torch_scripts, test_torch_scripts.test_script_runs_unmodified_under_gradviz, n)
                    for n in cases]
    assert {conftest.group_of(i) for i in corpus + gradviz_runs} == {"test_torch_scripts.py corpus"}
    traced = test_torch_scripts.test_script_traced_on_real_pytorch_records_no_internal_error
    assert conftest.group_of(_id(test_torch_scripts, traced, cases[0])) is None


# module fixtures cheap enough to make once per worker: an import, a small trace, an array, a schema
CHEAP_MODULE_FIXTURES = {"test_math_oracle.py", "test_sarif.py", "test_trace_format.py", "test_trace_no_copy.py",
                         "test_render_rankdir_size.py"}


def test_every_test_file_with_a_module_fixture_is_one_group_or_listed_as_cheap():
    """A new module fixture is either cheap (listed above) or its file's tests go to one worker."""
    tests = ROOT / "tests"
    declared = re.compile(r'^@pytest\.fixture\(scope="module"', re.M)
    with_fixture = {p.name for p in tests.glob("test_*.py") if declared.search(p.read_text())}
    assert "test_html_browser.py" in with_fixture and "test_rpc_trace.py" in with_fixture
    by_fixture = {"test_distributed.py", "test_torchrun_terminal.py"}  # the fixture's users only: the test above
    for name in sorted(with_fixture - CHEAP_MODULE_FIXTURES - by_fixture):
        groups = {conftest.group_of(f"tests/{name}::{test}") for test in ("test_a", "test_b[x]")}
        assert len(groups) == 1 and None not in groups, name
    for name in CHEAP_MODULE_FIXTURES:
        assert conftest.group_of(f"tests/{name}::test_a") is None, name
