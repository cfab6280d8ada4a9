"""The merge step and the per-rank rendering on hand-made documents (no processes), and the child bootstrap's
hand-over to another ``sitecustomize``."""

import os
import subprocess
import sys
from pathlib import Path

import gradviz
from gradviz.distributed.config import BOOTSTRAP_DIR, ENV, child_environment, new_config
from gradviz.distributed.merge import first_divergence, merge
from gradviz.document import validate
from gradviz.rendering.ranks import job_lines, ranks_section, verdict_lines

REPO = Path(__file__).resolve().parent.parent


def rank_doc(rank, signatures_by_iteration, diagnostics=(), status="finished", stopped_at=None):
    doc = gradviz.trace(engine="gradviz").to_dict()
    signatures = sorted({s for sigs in signatures_by_iteration for s in sigs})
    doc["structures"] = [{"id": i, "signature": s, "count": 0, "first_graph": 0, "last_graph": 0,
                          "iterations": [0, 0], "node_count": 3} for i, s in enumerate(signatures)]
    graphs = []
    for iteration, sigs in enumerate(signatures_by_iteration):
        for s in sigs:
            structure = signatures.index(s)
            entry = doc["structures"][structure]
            entry["iterations"][1] = iteration
            if entry["count"] == 0:
                entry["iterations"][0] = iteration
            entry["count"] += 1
            graphs.append({"id": len(graphs), "structure": structure, "iteration": iteration, "nodes": [],
                           "roots": [], "saved_bytes": 0, "output_bytes": 0, "freed_by": None,
                           "alive_at_end": False, "full": True})
    doc["graphs"] = graphs
    doc["iterations"] = len(signatures_by_iteration)
    doc["diagnostics"] = [dict(d) for d in diagnostics]
    doc["process"] = {"rank": rank, "local_rank": rank, "world_size": 2, "pid": 100 + rank, "parent_pid": 1,
                      "how": "torchrun", "status": status, "stopped_at": stopped_at, "run_id": "r"}
    return doc


def leak(line, nodes):
    return {"code": "retained-graph", "severity": "warning", "message": "graphs kept", "nodes": nodes,
            "variables": [], "links": [], "count": 1, "location": {"file": "train.py", "line": line, "text": "",
                                                                    "function": "f"}}


def test_first_divergence_is_the_first_iteration_where_the_ranks_graphs_differ():
    same = [["a"], ["a"], ["a"]]
    assert first_divergence([rank_doc(0, same), rank_doc(1, same)]) is None
    split = first_divergence([rank_doc(0, [["a"], ["a"], ["a"]]), rank_doc(1, [["a"], ["b"], ["a"]])])
    assert split == {"iteration": 1, "by_rank": {"0": ["a"], "1": ["b"]}}


def test_a_structure_only_one_rank_built_counts_even_where_the_other_kept_no_graph():
    docs = [rank_doc(0, [["a"], [], ["a"]]), rank_doc(1, [["a"], [], ["a", "c"]])]
    assert first_divergence(docs)["iteration"] == 2


def test_diagnostics_of_all_ranks_are_merged_per_code_and_line_with_their_ranks():
    docs = [rank_doc(0, [["a"]], [leak(7, [3])]), rank_doc(1, [["a"]], [leak(7, [5]), leak(9, [2])])]
    doc = merge(None, docs, how="torchrun")
    assert [(d["location"]["line"], d["details"]["ranks"], d["count"]) for d in doc["diagnostics"]] == [
        (7, [0, 1], 2), (9, [1], 1)]
    assert doc["diagnostics"][0]["nodes"] == [3]  # rank 0's ids are the top level's own
    assert doc["diagnostics"][1]["nodes"] == []  # rank 1's are not: read them in ranks
    assert [d["id"] for d in doc["diagnostics"]] == [0, 1]
    validate(doc)


def test_children_that_left_no_document_are_listed_unseen_with_their_line_and_why():
    main = gradviz.trace(engine="gradviz").to_dict()
    child = rank_doc(0, [["a"]])
    where = {"file": "s.py", "line": 4, "text": "p.start()", "function": "<module>"}
    started = [{"pid": 100, "how": "torch.multiprocessing.spawn", "location": where, "exitcode": 0},
               {"pid": 7, "how": "multiprocessing.Process.start (spawn)", "location": where, "exitcode": -9},
               {"pid": 8, "how": "multiprocessing.Process.start (spawn)", "location": where, "exitcode": -9}]
    doc = merge(main, [child], started, [{"how": "subprocess.Popen python x.py", "location": where}])
    children = [e for e in doc["unseen"] if e["kind"] == "child-process"]  # (the empty trace saw no graph too)
    entries = [(e["how"], e["count"]) for e in children]
    assert entries == [("multiprocessing.Process.start (spawn)", 2), ("subprocess.Popen python x.py", 1)]
    assert "killed by SIGKILL" in children[0]["what"] and children[0]["location"] == where
    assert doc["job"]["not_traced"] == 3 and doc["job"]["started"] == 3
    validate(doc)


def test_the_job_lines_and_the_html_section_say_who_stopped_where_escaped():
    hostile = {"file": "<b>x</b>.py", "line": 3, "text": "", "function": "f"}
    docs = [rank_doc(0, [["a"]], status="killed", stopped_at=hostile), rank_doc(1, [["b"]])]
    docs[0]["status"]["signal"] = "SIGTERM"
    doc = merge(None, docs, how="torchrun")
    lines = job_lines(doc)
    assert verdict_lines(doc) == ["Job failed first on rank 0 at <b>x</b>.py:3: killed (SIGTERM)"]
    assert not any("stopped at" in line for line in lines)  # the verdict said it: not repeated under the table
    assert any(line.startswith("The ranks' graphs first differ at iteration 0") for line in lines)
    page = ranks_section(doc)
    assert "<b>x</b>" not in page and "&lt;b&gt;x&lt;/b&gt;.py:3" in page
    assert ranks_section(gradviz.trace(engine="gradviz").to_dict()) == ""


def child_doc(pid, signatures_by_iteration):
    doc = rank_doc(0, signatures_by_iteration)
    doc["process"].update(rank=None, local_rank=None, world_size=None, pid=pid,
                          how="multiprocessing.Process.start (spawn)")
    return doc


def test_children_with_no_rank_are_called_by_their_pid_in_structures_and_the_first_divergence():
    main = gradviz.trace(engine="gradviz").to_dict()
    doc = merge(main, [child_doc(4242, [["a"], ["a"]]), child_doc(4243, [["a"], ["b"]])])
    job = doc["job"]
    assert job["first_divergence"] == {"iteration": 1, "by_rank": {"pid 4242": ["a"], "pid 4243": ["b"]}}
    by_signature = {s["signature"]: s for s in job["structures"]}
    assert (by_signature["a"]["ranks"], by_signature["a"]["processes"]) == ([], ["pid 4242", "pid 4243"])
    assert by_signature["a"]["counts"] == {"pid 4242": 2, "pid 4243": 1}
    assert by_signature["b"]["first_iteration"] == {"pid 4243": 1}
    assert ("The ranks' graphs first differ at iteration 1 (structures: pid 4242: a; pid 4243: b)"
            in job_lines(doc))
    page = ranks_section(doc)  # the matrix reads each process's own count, not a rank it lacks
    assert "<td><code>a</code></td><td>3</td><td>2</td><td>1</td>" in page
    assert "<td><code>b</code></td><td>3</td><td>—</td><td>1</td>" in page
    validate(doc)


def test_the_bootstrap_hands_over_to_the_sitecustomize_it_hides(tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "sitecustomize.py").write_text("import os\nos.environ['OTHER_SITECUSTOMIZE'] = 'ran'\n")
    config = new_config(tmp_path / "out")
    env = child_environment(config, dict(os.environ, PYTHONPATH=os.pathsep.join([str(other), str(REPO)])))
    assert env["PYTHONPATH"].split(os.pathsep)[0] == BOOTSTRAP_DIR and ENV in env
    code = "import os, sys; print(os.environ.get('OTHER_SITECUSTOMIZE'), 'gradviz.distributed.child' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["ran", "False"]  # not a multiprocessing child: left alone, and the other one ran


def test_dataloader_workers_are_not_traced_and_are_listed_as_such():
    import multiprocessing

    from torch.utils.data._utils.worker import _worker_loop

    from gradviz.distributed.child import DATALOADER_WORKER, how_started

    assert how_started(multiprocessing.Process(target=_worker_loop)) == (DATALOADER_WORKER, None)
    assert how_started(multiprocessing.get_context("spawn").Process(target=print)) == (
        "multiprocessing.Process.start (spawn)", None)
    main = gradviz.trace(engine="gradviz").to_dict()
    where = {"file": "s.py", "line": 9, "text": "for x in loader:", "function": "<module>"}
    started = [{"pid": 50 + i, "how": DATALOADER_WORKER, "location": where, "exitcode": 0} for i in range(2)]
    [entry] = [e for e in merge(main, [], started)["unseen"] if e["kind"] == "child-process"]
    assert (entry["count"], entry["what"]) == (2, "DataLoader worker processes (they load data; not traced)")
    assert entry["location"] == where


def test_the_job_diagnostics_come_last_with_their_links_renumbered(monkeypatch):
    import types

    job = [{"id": 0, "code": "ddp-unused-parameters", "severity": "error", "message": "m", "links": [1],
            "details": {"ranks": [1]}},
           {"id": 1, "code": "ddp-divergent-graph", "severity": "error", "message": "m", "links": [0],
            "details": {"ranks": [0, 1]}}]
    rules = types.ModuleType("gradviz.diagnose.ddp_rules")
    rules.diagnose_job = lambda docs: [dict(d) for d in job] if len(docs) == 2 else []
    monkeypatch.setitem(sys.modules, "gradviz.diagnose.ddp_rules", rules)
    docs = [rank_doc(0, [["a"]], [leak(7, [3])]), rank_doc(1, [["a"]])]
    doc = merge(None, docs, how="torchrun")
    assert [(d["id"], d["code"], d["links"]) for d in doc["diagnostics"]] == [
        (0, "retained-graph", []), (1, "ddp-unused-parameters", [2]), (2, "ddp-divergent-graph", [1])]
