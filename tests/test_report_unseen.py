"""The terminal report never reads as an all-clear when the trace saw less than the run did: the document's
``unseen`` entries come first, and "nothing suspicious" is said only of a trace that saw work and nothing else."""

from rich.console import Console

from gradviz.document.coverage import all_clear, saw_autograd
from gradviz.rendering.report import diagnostics_blocks, unseen_block, verdict
from tests.synthetic_docs import DocBuilder

ALL_CLEAR = "gradviz: no mistakes seen in 1 graph"


def text_of(renderable):
    console = Console(width=120, record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


def _clean_doc():
    b = DocBuilder()
    w = b.leaf("w", [3], parameter=True)
    b.backward(b.op("SumBackward", [b.op("MulBackward", [w], [3], saved=[w])], []))
    doc = b.finish()
    doc["unseen"] = []
    return doc


def _no_autograd(how="the script runs on gradviz's engine (`torch` is `gradviz`), but this run watched real "
                     "PyTorch only"):
    return {"kind": "no-autograd", "what": "autograd work", "count": 1, "how": how, "location": None,
            "advice": "run it with --engine gradviz"}


def test_a_trace_that_saw_work_and_nothing_else_is_an_all_clear():
    doc = _clean_doc()
    assert saw_autograd(doc) and all_clear(doc)
    assert text_of(verdict(doc)).strip() == ALL_CLEAR
    assert unseen_block(doc) is None and diagnostics_blocks(doc) is None


def test_a_trace_that_saw_no_graph_says_so_and_why_at_the_top():
    doc = DocBuilder().finish()
    doc["unseen"] = [_no_autograd()]
    assert not saw_autograd(doc) and not all_clear(doc)
    assert unseen_block(doc) is None  # the verdict itself says it, with the advice below
    top = [line.rstrip() for line in text_of(verdict(doc)).splitlines()]
    assert top == ["gradviz saw no graph: the script runs on gradviz's engine (`torch` is `gradviz`), but this "
                   "run watched real PyTorch only",
                   "   advice: run it with --engine gradviz"]


def test_an_empty_document_is_never_an_all_clear_even_without_an_entry():
    doc = DocBuilder().finish()
    assert text_of(verdict(doc)) == "gradviz saw no graph: no autograd work reached the trace\n"


def test_unseen_entries_are_listed_with_count_how_location_and_advice():
    doc = _clean_doc()
    doc["unseen"] = [{"kind": "child-process", "what": "worker process", "count": 4,
                      "how": "torch.multiprocessing.spawn", "advice": "trace inside the worker",
                      "location": {"file": "train.py", "line": 31, "text": "mp.spawn(run, nprocs=4)",
                                   "function": "<module>"}},
                     {"kind": "thread", "what": "threads running beside the trace (loader)", "count": 1,
                      "how": None, "location": None, "advice": None}]
    assert not all_clear(doc)
    top = [line.rstrip() for line in text_of(verdict(doc)).splitlines()]
    assert top == ["gradviz: no mistakes seen in what it saw (1 graph); work beyond its sight is listed below "
                   "(2 entries)",
                   "",
                   "Not seen by this trace (2)",
                   " child-process  worker process (×4)",
                   "    how: torch.multiprocessing.spawn",
                   "    at: train.py:31",
                   "    advice: trace inside the worker",
                   " thread  threads running beside the trace (loader)"]


def test_unseen_text_from_the_document_is_escaped_for_the_terminal():
    doc = DocBuilder().finish()  # saw no graph: the verdict quotes how
    doc["unseen"] = [_no_autograd(how="\x1b[31mred[/] [bold]x")]
    out = text_of(verdict(doc))
    assert "\x1b" not in out and "\\x1b[31mred[/] [bold]x" in out


def test_a_trace_that_saw_backward_calls_but_no_graph_of_its_own_counts_the_calls():
    doc = DocBuilder().finish()
    doc["backwards"], doc["unseen"] = [{"id": 0}, {"id": 1}], []  # graphs built before the trace started
    assert saw_autograd(doc) and text_of(verdict(doc)).strip() == "gradviz: no mistakes seen in 2 backward calls"
