"""A run in which gradviz saw no autograd work says so at the top of the report, with the likely reason, and
never "nothing suspicious": the document carries it as an ``unseen`` entry of kind ``no-autograd``."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

import gradviz

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE = os.path.join(ROOT, "samples", "loss_accumulation_leak.py")


def _run(tmp_path, *args):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), COLUMNS="200")
    proc = subprocess.run([sys.executable, "-m", "gradviz", "run", "--no-render", "--out", str(tmp_path / "out"),
                           *args], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)
    with open(tmp_path / "out" / "report.json") as f:
        return proc, json.load(f)


def _blind(doc):
    return [e for e in doc["unseen"] if e["kind"] == "no-autograd"]


def test_a_gradviz_sample_run_with_engine_torch_says_it_saw_no_graph_and_why(tmp_path):
    pytest.importorskip("torch")
    proc, doc = _run(tmp_path, "--engine", "torch", SAMPLE)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    top = lines.index("gradviz saw no graph: the script runs on gradviz's engine (`torch` is `gradviz`), but "
                      "this run watched real PyTorch only")
    assert lines[top + 1].strip() == "advice: run it with --engine gradviz"
    assert top < lines.index("Summary")
    assert "nothing suspicious" not in proc.stdout
    assert "no mistakes" not in proc.stdout  # the verdict is that line: nothing was checked
    [entry] = _blind(doc)
    assert entry["count"] == 1 and "watched real PyTorch only" in entry["how"]


def test_the_same_sample_on_its_own_engine_sees_its_graphs_and_no_blind_spot(tmp_path):
    proc, doc = _run(tmp_path, SAMPLE)
    assert _blind(doc) == [] and doc["structures"]
    assert [d["code"] for d in doc["diagnostics"]] == ["retained-graph"]
    assert "gradviz saw no graph" not in proc.stdout


def test_a_script_without_autograd_work_says_nothing_ran(tmp_path):
    pytest.importorskip("torch")
    script = tmp_path / "inference.py"
    script.write_text(textwrap.dedent("""\
        import torch
        x = torch.ones(3)
        print((x * 2).sum().item())
    """))
    proc, doc = _run(tmp_path, str(script))
    assert proc.returncode == 0, proc.stderr
    [entry] = _blind(doc)
    assert entry["how"] == "no operation on a tensor that requires grad ran (watching real PyTorch)"
    assert "gradviz saw no graph: no operation on a tensor that requires grad ran" in proc.stdout
    assert "nothing suspicious" not in proc.stdout


def test_a_script_that_stops_before_any_graph_says_where(tmp_path):
    script = tmp_path / "early.py"
    script.write_text("import gradviz as torch\nw = torch.ones(3, requires_grad=True)\nraise ValueError('no data')\n")
    proc, doc = _run(tmp_path, str(script))
    assert proc.returncode == 1
    [entry] = _blind(doc)
    assert entry["how"] == ("no operation on a tensor that requires grad ran before the script stopped at line 3 "
                            "(ValueError) (watching gradviz's engine)")


def test_an_in_process_trace_of_torch_code_on_gradviz_engine_names_the_engine():
    torch = pytest.importorskip("torch")
    with gradviz.trace(engine="gradviz") as tr:
        w = torch.ones(3, requires_grad=True)
        (w * 2).sum().backward()
    [entry] = _blind(tr.to_dict())
    assert entry["how"] == "torch is imported, but the trace watched gradviz's engine only"
    assert entry["advice"] == 'trace PyTorch with gradviz.trace(engine="torch") (or "auto")'


def _doc_with(*entries):
    from gradviz.tracing.no_autograd import add_no_autograd

    doc = {"graphs": [], "nodes": [], "backwards": [], "structures": [], "dropped": {}, "unseen": list(entries),
           "engine": {"name": "torch"}, "status": {"exception": None}}
    add_no_autograd(doc)
    return doc


def test_child_processes_are_named_as_the_likely_reason():
    from gradviz.cli.blind_spots import explain_no_autograd

    child = {"kind": "child-process", "what": "worker process", "count": 2, "how": "torch.multiprocessing.spawn",
             "location": None, "advice": None}
    doc = _doc_with(child)
    explain_no_autograd(doc, "torch", {})
    [entry] = _blind(doc)
    assert entry["how"] == ("the work may have run in the 2 child process(es) the script started, started with "
                            "torch.multiprocessing.spawn: gradviz traces the main process only")


def test_real_torch_bound_under_gradviz_engine_is_named_as_the_likely_reason():
    torch = pytest.importorskip("torch")
    from gradviz.cli.blind_spots import explain_no_autograd

    doc = _doc_with()
    explain_no_autograd(doc, "gradviz", {"T": torch, "gv": gradviz})
    [entry] = _blind(doc)
    assert entry["how"].startswith("the script uses real PyTorch (`T` is `torch`")
    assert entry["advice"] == "run it with --engine torch"
