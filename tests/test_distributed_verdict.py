"""The job's verdict and the order of its diagnostics, as pure functions of the processes' rows and the merged
diagnostics (``distributed/verdict.py``, ``merge.causes_first``); the real jobs are in test_distributed.py."""

from gradviz.distributed.merge import causes_first, job_summary
from gradviz.distributed.verdict import job_verdict
from gradviz.rendering.ranks import verdict_lines


def row(rank, status="finished", at=None, reason=None, line=None, waiting=None, ddp=True, exit_code=None):
    stopped = {"file": "/x/train.py", "line": line, "text": "", "function": "<module>"} if line else None
    if stopped and waiting:
        stopped["waiting_in"] = waiting
    return {"rank": rank, "pid": 100 + rank, "how": "torchrun", "status": status, "ended_at": at,
            "reason": reason, "stopped_at": stopped, "ddp": ddp,
            "exit_code": exit_code if exit_code is not None else (0 if status == "finished" else 1)}


def test_a_clean_job_has_no_verdict():
    assert job_verdict([row(0), row(1)], world_size=2) is None


def test_the_first_failure_in_time_leads_and_the_knock_on_errors_follow_it_in_order():
    rows = [row(0, "exception", 10.9, "RuntimeError: Connection reset by peer", 15),
            row(1, "exception", 10.0, "RuntimeError: rank 1 gives up", 18),
            row(2, "killed", 11.5, "killed (SIGTERM)", 15, waiting="all_reduce"),
            row(3, "exception", 10.5, "RuntimeError: Connection closed by peer", 15)]
    verdict = job_verdict(rows, world_size=4)
    assert (verdict["kind"], verdict["rank"], verdict["location"]["line"]) == ("crash", 1, 18)
    assert verdict["reason"] == "RuntimeError: rank 1 gives up"
    assert [k["rank"] for k in verdict["knock_on"]] == [3, 0, 2]
    assert verdict["knock_on"][2]["waiting_in"] == "all_reduce"
    lines = verdict_lines({"job": {"verdict": verdict}})
    assert lines[0] == "Job failed first on rank 1 at /x/train.py:18: RuntimeError: rank 1 gives up"
    assert lines[1] == "  then: rank 3 at /x/train.py:15: RuntimeError: Connection closed by peer"
    assert lines[3] == "  then: rank 2 in `all_reduce` at /x/train.py:15: killed (SIGTERM)"


def test_a_knock_on_gloo_error_is_one_short_clause_under_the_first_failure():
    gloo = ("RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed "
            "by peer [127.0.0.1]:27303. This is typically caused by a remote worker crashing. Check the logs.")
    verdict = job_verdict([row(0, "exception", 2.0, gloo, 15), row(1, "exception", 1.0, "ValueError: bad", 9)], 2)
    assert verdict_lines({"job": {"verdict": verdict}})[1] == (
        "  then: rank 0 at /x/train.py:15: RuntimeError: Connection closed by peer [127.0.0.1]:27303")
    assert verdict["knock_on"][0]["reason"] == gloo  # the document keeps the whole message


def test_a_rank_killed_first_by_a_signal_leads_even_when_rank_0_raised():
    rows = [row(0, "exception", 20.4, "RuntimeError: Connection reset by peer", 15),
            row(1, "killed", 20.0, "killed (SIGTERM)", 7)]
    verdict = job_verdict(rows, world_size=2)
    assert (verdict["kind"], verdict["rank"]) == ("killed", 1)
    assert [k["rank"] for k in verdict["knock_on"]] == [0]


def killed_doc(rank, at, line, sender, waiting=None):
    stopped = {"file": "/x/train.py", "line": line, "text": "", "function": "<module>"}
    if waiting:
        stopped["waiting_in"] = waiting
    return {"process": {"rank": rank, "pid": 100 + rank, "parent_pid": 50, "how": "torchrun", "status": "killed",
                        "world_size": 2, "stopped_at": stopped},
            "status": {"ending": "killed", "exit_code": 143, "signal": "SIGTERM", "signal_sender": sender,
                       "ended_at": at}, "diagnostics": [], "ddp": [{}]}


def test_a_rank_killed_from_outside_leads_and_the_launchers_teardown_follows_whatever_the_clocks_say():
    # rank 1 got `kill -TERM` from pid 999; torchrun (pid 50, the ranks' parent) then stopped rank 0 in its
    # all-reduce 0.3 s later: both were killed close together, yet this is no hang, and rank 1 leads even when
    # rank 0's clock puts its stop first
    for rank0_at in (10.3, 9.9):
        docs = [killed_doc(0, rank0_at, 29, 50, waiting="all_reduce"), killed_doc(1, 10.0, 28, 999)]
        job = job_summary(docs, "torchrun", True)
        verdict = job["verdict"]
        assert (verdict["kind"], verdict["rank"], verdict["location"]["line"]) == ("killed", 1, 28)
        assert verdict["reason"] == "killed (SIGTERM from pid 999, not the launcher)"
        assert [(k["rank"], k["reason"]) for k in verdict["knock_on"]] == [(0, "killed (SIGTERM)")]
        assert [p["stopped_by"] for p in job["processes"]] == ["launcher", "outside"]
        assert verdict_lines({"job": job})[0] == (
            "Job failed first on rank 1 at /x/train.py:28: killed (SIGTERM from pid 999, not the launcher)")


def test_ranks_the_launcher_stopped_together_after_a_timeout_are_still_a_hang():
    docs = [killed_doc(0, 10.3, 29, 50, waiting="all_reduce"), killed_doc(1, 10.0, 28, 50)]
    verdict = job_summary(docs, "torchrun", True, timed_out=True)["verdict"]
    assert (verdict["kind"], verdict["rank"], verdict["collective"]) == ("hang", 1, "all_reduce")


def test_a_rank_with_no_document_is_named_first_and_the_others_follow():
    rows = [row(0, "exception", 5.0, "RuntimeError: Connection closed by peer", 15),
            row(2, "killed", 6.0, "killed (SIGTERM)", 15, waiting="all_reduce")]
    verdict = job_verdict(rows, world_size=3)
    assert (verdict["kind"], verdict["rank"], verdict["missing"]) == ("missing", 1, [1])
    assert "SIGKILL" in verdict["reason"]
    assert [k["rank"] for k in verdict["knock_on"]] == [0, 2]
    assert verdict_lines({"job": {"verdict": verdict}})[0].startswith("Job failed first on rank 1: it left no")


def test_in_a_hang_the_rank_outside_any_collective_is_the_one_the_others_waited_for():
    rows = [row(0, "killed", 60.0, "killed (SIGTERM)", 21, waiting="all_reduce"),
            row(1, "killed", 60.1, "killed (SIGTERM)", 20),
            row(2, "killed", 60.2, "killed (SIGTERM)", 21, waiting="all_reduce")]
    verdict = job_verdict(rows, world_size=3, timed_out=True)
    assert (verdict["kind"], verdict["rank"], verdict["location"]["line"]) == ("hang", 1, 20)
    assert verdict["collective"] == "all_reduce"
    assert [w["rank"] for w in verdict["waiting"]] == [0, 2]
    assert verdict_lines({"job": {"verdict": verdict}})[0] == (
        "Job hung: rank 1 was waited for, at /x/train.py:20; the others waited in `all_reduce`")


def test_a_backward_is_a_collective_only_on_a_rank_that_used_ddp():
    rows = [row(0, "killed", 9.0, "killed (SIGTERM)", 12, waiting="backward", ddp=False),
            row(1, "killed", 9.0, "killed (SIGTERM)", 30, waiting="backward")]
    verdict = job_verdict(rows, world_size=2, timed_out=True)
    assert (verdict["rank"], verdict["collective"]) == (0, "backward")


def test_every_rank_in_a_collective_blames_none():
    rows = [row(0, "killed", 9.0, "killed (SIGTERM)", 12, waiting="all_reduce"),
            row(1, "killed", 9.1, "killed (SIGTERM)", 13, waiting="broadcast")]
    verdict = job_verdict(rows, world_size=2, timed_out=True)
    assert verdict["rank"] is None and "mismatched collectives" in verdict["reason"]


def diag(i, code, line, links=()):
    return {"id": i, "code": code, "severity": "error", "message": code, "hint": "h",
            "location": {"file": "/x/t.py", "line": line}, "links": list(links), "details": {"ranks": [0, 1]}}


def test_grad_mismatch_follows_the_unused_parameters_that_caused_it_and_is_linked_to_it():
    out = causes_first([diag(0, "ddp-grad-mismatch", 5), diag(1, "nan-inf", 9, links=[2]),
                        diag(2, "ddp-unused-parameters", 30, links=[1])])
    assert [(d["id"], d["code"]) for d in out] == [(0, "nan-inf"), (1, "ddp-unused-parameters"),
                                                  (2, "ddp-grad-mismatch")]
    assert out[0]["links"] == [1]  # nan-inf's link to unused-parameters, renumbered
    assert out[2]["details"]["caused_by"] == 1 and out[2]["links"] == [1] and 2 in out[1]["links"]
    assert out[2]["hint"].startswith("Fix `ddp-unused-parameters` first (at t.py:30)")
    assert out[2]["related"][-1] == {"role": "cause: ddp-unused-parameters", "location": out[1]["location"]}


def test_grad_mismatch_alone_is_left_as_it_is():
    out = causes_first([diag(0, "ddp-grad-mismatch", 5)])
    assert "caused_by" not in out[0]["details"] and out[0]["hint"] == "h"


def test_the_diags_column_counts_the_job_level_diagnostics_that_name_the_rank():
    docs = [{"process": {"rank": r, "pid": r, "how": "torchrun", "status": "finished", "world_size": 2},
             "status": {}, "diagnostics": []} for r in (0, 1)]
    diagnostics = [{"code": "ddp-divergent-graph", "details": {"ranks": [0, 1]}},
                   {"code": "ddp-unused-parameters", "details": {"ranks": [1]}}]
    job = job_summary(docs, "torchrun", True, diagnostics=diagnostics)
    assert [p["diagnostics"] for p in job["processes"]] == [1, 2]


def test_a_librarys_own_helper_interpreters_are_one_line_that_says_what_they_are(tmp_path):
    import os
    import sysconfig

    from gradviz.distributed.merge import not_traced
    from gradviz.distributed.parent import noting_children

    # six compile workers started by torch's own code (as torch.compile's SubprocPool does), from one user line
    fake = os.path.join(sysconfig.get_paths()["purelib"], "torch", "_inductor", "fake_pool.py")
    helper = compile("import subprocess, sys\n"
                     "def start(key):\n"
                     "    subprocess.run([sys.executable, '-c', 'pass', '--torch-key=' + key], check=True)\n",
                     fake, "exec")
    space = {}
    exec(helper, space)
    with noting_children() as children:
        for key in "abcdef":
            space["start"](key)
        import subprocess
        import sys
        subprocess.run([sys.executable, "-c", "pass"], check=True)  # the script's own interpreter
    entries = not_traced([], [], children.subprocesses)
    assert [(e["count"], e["how"]) for e in entries] == [
        (6, "subprocess.Popen from torch's own code"), (1, f"subprocess.Popen {sys.executable} -c pass")]
    assert entries[0]["what"].startswith("torch's own helper processes (e.g. torch.compile's compile workers)")
    assert entries[0]["advice"].startswith("nothing to do") and entries[1]["advice"].startswith("trace it on its")


def test_the_page_puts_the_verdict_above_the_processes_table_escaped():
    from gradviz.rendering.ranks import ranks_section

    rows = [row(0, "exception", 2.0, "RuntimeError: <gone>", 15), row(1, "exception", 1.0, "ValueError: a<b", 9)]
    verdict = job_verdict(rows, world_size=2)
    page = ranks_section({"job": {"processes": rows, "verdict": verdict, "structures": []}, "ranks": []})
    first = '<p class="verdict">Job failed first on rank 1 at /x/train.py:9: ValueError: a&lt;b</p>'
    assert page.index(first) < page.index('<table class="ranks">')
    assert '<p class="verdict">then: rank 0 at /x/train.py:15: RuntimeError: &lt;gone&gt;</p>' in page
