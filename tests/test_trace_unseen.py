"""The document's ``unseen`` section: what ran beyond the trace's sight is listed, counted and validated."""

import threading

import gradviz
from gradviz.document import validate
from gradviz.tracing.builder import TraceBuilder
from gradviz.tracing.document import unseen_section
from gradviz.tracing.thread_facts import may_work_beside


def test_repeats_of_one_entry_add_up_and_new_ones_keep_their_order():
    builder = TraceBuilder()
    builder.unseen("child-process", "worker process", how="multiprocessing.Process.start")
    builder.unseen("compiled-region", "torch.compile region", count=3)
    builder.unseen("child-process", "worker process", how="multiprocessing.Process.start", advice="trace it")
    entries = unseen_section(builder)
    assert [(e["kind"], e["count"], e["advice"]) for e in entries] == [
        ("child-process", 2, "trace it"), ("compiled-region", 3, None)]
    assert entries[0]["how"] == "multiprocessing.Process.start"


def test_a_thread_running_before_the_trace_is_listed_as_unseen():
    stop = threading.Event()
    worker = threading.Thread(target=stop.wait, name="before-trace", daemon=True)
    worker.start()
    try:
        with gradviz.trace() as tr:
            x = gradviz.ones(2, requires_grad=True)
            (x * 2).sum().backward()
        doc = tr.to_dict()
    finally:
        stop.set()
        worker.join()
    validate(doc)
    threads = [e for e in doc["unseen"] if e["kind"] == "thread"]
    # threads earlier tests left running in this worker are listed too, and the entry names the first five only
    unobserved = [t["name"] for t in doc["threads"]["unobserved"]]
    assert "before-trace" in unobserved
    assert len(threads) == 1 and threads[0]["count"] == len(unobserved)
    assert threads[0]["what"].startswith("threads running beside the trace (")


def test_a_clean_traced_block_has_nothing_unseen():
    # threads an earlier test left running in this worker are rightly listed; nothing else may be. A dummy thread
    # left by the in-process RPC test, or a tqdm monitor, is not one of them
    others = [t for t in threading.enumerate() if t is not threading.current_thread() and may_work_beside(t)]
    with gradviz.trace() as tr:
        x = gradviz.ones(2, requires_grad=True)
        (x * 2).sum().backward()
    unseen = tr.to_dict()["unseen"]
    assert [e for e in unseen if e["kind"] != "thread"] == []
    assert len([e for e in unseen if e["kind"] == "thread"]) == (1 if others else 0)
