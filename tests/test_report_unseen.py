"""The terminal report never reads as an all-clear when the trace saw less than the run did: the document's
``unseen`` entries come first, and "nothing suspicious" is said only of a trace that saw work and nothing else."""

from rich.console import Console

from gradviz.document.coverage import all_clear, saw_autograd
from gradviz.rendering.report import diagnostics_table, unseen_block
from tests.synthetic_docs import DocBuilder

ALL_CLEAR = "No diagnostics: nothing suspicious was found."


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
    assert text_of(diagnostics_table(doc)).strip() == ALL_CLEAR
    assert unseen_block(doc) is None


def test_a_trace_that_saw_no_graph_says_so_and_why_at_the_top():
    doc = DocBuilder().finish()
    doc["unseen"] = [_no_autograd()]
    assert not saw_autograd(doc) and not all_clear(doc)
    table = text_of(diagnostics_table(doc))
    assert "nothing suspicious" not in table and "gradviz saw no graph, so nothing was checked" in table
    top = [line.rstrip() for line in text_of(unseen_block(doc)).splitlines()]
    assert top == ["gradviz saw no graph: the script runs on gradviz's engine (`torch` is `gradviz`), but this "
                   "run watched real PyTorch only",
                   "   advice: run it with --engine gradviz"]


def test_an_empty_document_is_never_an_all_clear_even_without_an_entry():
    doc = DocBuilder().finish()
    assert "nothing suspicious" not in text_of(diagnostics_table(doc))


def test_unseen_entries_are_listed_with_count_how_location_and_advice():
    doc = _clean_doc()
    doc["unseen"] = [{"kind": "child-process", "what": "worker process", "count": 4,
                      "how": "torch.multiprocessing.spawn", "advice": "trace inside the worker",
                      "location": {"file": "train.py", "line": 31, "text": "mp.spawn(run, nprocs=4)",
                                   "function": "<module>"}},
                     {"kind": "thread", "what": "threads running beside the trace (loader)", "count": 1,
                      "how": None, "location": None, "advice": None}]
    assert not all_clear(doc)
    table = text_of(diagnostics_table(doc)).strip()
    assert table == ("No diagnostics in what gradviz saw; what ran beyond its sight is listed at the top of this "
                     "report.")
    top = [line.rstrip() for line in text_of(unseen_block(doc)).splitlines()]
    assert top == ["Not seen by this trace (2)",
                   " child-process  worker process (×4)",
                   "    how: torch.multiprocessing.spawn",
                   "    at: train.py:31",
                   "    advice: trace inside the worker",
                   " thread  threads running beside the trace (loader)"]


def test_unseen_text_from_the_document_is_escaped_for_the_terminal():
    doc = _clean_doc()
    doc["unseen"] = [_no_autograd(how="\x1b[31mred[/] [bold]x")]
    out = text_of(unseen_block(doc))
    assert "\x1b" not in out and "\\x1b[31mred[/] [bold]x" in out
