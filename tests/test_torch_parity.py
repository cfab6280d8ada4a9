"""Real PyTorch and gradviz's engine give the same diagnostics (codes, severities, lines) for the same program.

Every sample and every diagnostic scenario of tests/test_diagnose_e2e.py that is a valid PyTorch program runs
twice: on gradviz's engine (``import gradviz as torch``) and on real PyTorch (the same source with the imports
pointing at torch, traced with ``engine="torch"``). Differences are listed below with their reasons.
"""

import json
import os
import re
import textwrap

import pytest

torch = pytest.importorskip("torch")


from . import test_diagnose_e2e as e2e  # noqa: E402
from .shared_traces import default_torch_trace, trace_source  # noqa: E402

pytestmark = [pytest.mark.oracle, pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning")]
SAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "samples")

# sample or scenario -> why the two engines differ on it (both sides' diagnostics are still checked)
DIFFERENCES = {
    "seed_requires_grad_volatile.py": "PyTorch 0.4 removed `volatile`: `Variable(x, volatile=True)` only warns "
                                      "and the variable requires grad as usual, so on PyTorch it is a different "
                                      "program with no volatile variable to report (gradviz's engine keeps the "
                                      "old semantics to explain them).",
    "test_why_none_volatile": "`volatile` again (see above): on PyTorch the volatile input requires grad.",
    "freeze_keeps_grad.py": "A frozen parameter an optimizer step still changes (freeze-ineffective) is watched on "
                            "PyTorch only (tracing/adapters/frozen_watch.py): gradviz's engine tells its step "
                            "after the update, and nothing there copies the frozen parameters before it.",
    "dataset_mutated_inplace.py": "A cached tensor's view written again in place (dataset-mutated-inplace) is "
                                  "followed on PyTorch only (tracing/adapters/torch/cache_watch.py): gradviz's "
                                  "engine adapter does not hand its in-place writes to CacheWrites yet.",
    "dead_relu.py": "Dead ReLU units (dead-relu) are counted on PyTorch only (tracing/adapters/torch/relu_watch.py): "
                    "gradviz's engine adapter does not measure ReLU outputs yet.",
}


def to_torch(source):
    """The same program on real PyTorch: gradviz imports pointed at torch."""
    source = re.sub(r"^import gradviz as torch$", "import torch", source, flags=re.M)
    source = re.sub(r"^import gradviz\.", "import torch.", source, flags=re.M)
    return re.sub(r"^from gradviz(\.| )", lambda m: "from torch" + m.group(1), source, flags=re.M)


def summary(doc):
    return [(d["code"], d["severity"], (d.get("location") or {}).get("line")) for d in doc["diagnostics"]]


def _samples():
    with open(os.path.join(SAMPLES, "expected.json")) as f:
        return sorted((n, e) for n, e in json.load(f).items() if "ranks" not in e)  # DDP: test_ddp_torch


@pytest.mark.parametrize("name,expected", _samples(), ids=[n for n, _ in _samples()])
def test_samples_give_the_same_diagnostics_on_both_engines(name, expected):
    path = os.path.join(SAMPLES, name)
    with open(path) as f:
        source = f.read()
    if expected["torch"]:  # a plain PyTorch script: on gradviz's engine through the import shim
        from gradviz.cli.torch_shim import TorchShim

        with TorchShim():
            on_gradviz = trace_source(path, source, "gradviz")
    else:
        on_gradviz = trace_source(path, source, "gradviz")
    on_torch = default_torch_trace(path, to_torch(source))
    assert [c for c, _, _ in summary(on_gradviz)] == sorted(expected["codes"], key=expected["codes"].index) or \
        sorted(c for c, _, _ in summary(on_gradviz)) == sorted(expected["codes"])
    assert on_torch["engine"]["name"] == "torch" and not on_torch["internal_errors"]
    if name in DIFFERENCES:
        assert summary(on_torch) != summary(on_gradviz)  # still different: the reason above still holds
        return
    assert sorted(summary(on_torch)) == sorted(summary(on_gradviz))


# Scenarios that trace no script (they call gradviz's API on gradviz's engine objects directly): nothing to run on
# PyTorch. The test below still fails if a scenario outside this set runs no script.
NO_SCRIPT = {"test_why_none_through_the_trace"}


def _scenarios():
    return sorted(name for name in dir(e2e) if name.startswith("test_") and name not in NO_SCRIPT)


@pytest.mark.parametrize("scenario", _scenarios())
def test_diagnostic_scenarios_give_the_same_diagnostics_on_both_engines(scenario, tmp_path, monkeypatch, request):
    """Each scenario's own assertions run on gradviz's engine; every program it traces runs on PyTorch too."""
    compared = []
    original = e2e.run

    def run_on_both(tmp_path, body, name="script.py"):
        doc, lines = original(tmp_path, body, name)
        source = to_torch(e2e.PRELUDE + textwrap.dedent(body))
        torch_doc = trace_source(tmp_path / ("torch_" + name), source, "torch")
        compared.append((summary(doc), summary(torch_doc), torch_doc["internal_errors"]))
        return doc, lines

    monkeypatch.setattr(e2e, "run", run_on_both)
    test = getattr(e2e, scenario)
    marks = getattr(test, "pytestmark", [])
    params = [m for m in marks if m.name == "parametrize"]
    cases = [{}]
    for mark in params:  # run every parameter case of the scenario
        names = [n.strip() for n in mark.args[0].split(",")] if isinstance(mark.args[0], str) else mark.args[0]
        cases = [dict(c, **dict(zip(names, v if isinstance(v, (tuple, list)) and len(names) > 1 else (v,))))
                 for c in cases for v in mark.args[1]]
    for i, case in enumerate(cases):
        folder = tmp_path / f"case{i}"
        folder.mkdir()
        test(tmp_path=folder, **case)
    assert compared, f"{scenario} traced no script: list it in NO_SCRIPT if it only calls gradviz's API directly"
    for on_gradviz, on_torch, errors in compared:
        assert not errors
        if scenario in DIFFERENCES:
            continue
        assert sorted(on_torch) == sorted(on_gradviz), (on_torch, on_gradviz)
