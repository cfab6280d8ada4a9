"""A run that stopped at a name gradviz lacks never reads as checked: the report says where it stopped."""

from rich.console import Console

from gradviz.rendering import report


def text_of(renderable):
    console = Console(width=200, record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


def doc(diagnostics=(), unsupported="torch.fft"):
    location = {"file": "train.py", "line": 7, "text": "torch.fft.rfft(x)", "function": None}
    status = {"completed": False, "exception": {"type": "UnsupportedTorchAttribute", "message": "...",
                                                "location": location}}
    if unsupported:
        status["unsupported"] = unsupported
    return {"diagnostics": list(diagnostics), "status": status}


DIAG = {"severity": "error", "code": "none-grad", "location": {"file": "train.py", "line": 3}, "message": "m",
        "hint": "h"}


def test_no_diagnostics_before_the_stop_is_not_a_clean_bill_of_health():
    assert text_of(report.verdict(doc())) == ("gradviz: no mistakes seen before the run stopped at train.py:7: "
                                              "`torch.fft` is not supported by gradviz's engine; nothing after it "
                                              "was checked\n")
    assert report.diagnostics_blocks(doc()) is None and report.stopped_note(doc()) is None  # said once, above


def test_diagnostics_found_before_the_stop_are_followed_by_the_note():
    assert text_of(report.verdict(doc([DIAG]))) == ("gradviz: 1 mistake found (1 error) before the run stopped at "
                                                    "train.py:7; nothing after it was checked\n")
    text = text_of(report.diagnostics_blocks(doc([DIAG])))
    assert text.splitlines()[0].rstrip() == " error  none-grad  train.py:3"
    assert text.rstrip().endswith(
        "The run stopped at train.py:7: `torch.fft` is not supported by gradviz's engine. The diagnostics above "
        "cover the code before that point; nothing after it was checked.")


def test_a_complete_run_without_diagnostics_still_says_nothing_was_found():
    clean = {"diagnostics": [], "status": {"completed": True, "exception": None}, "backwards": [{"id": 0}],
             "unseen": [], "graphs": [{"id": 0}]}  # a run that saw a graph and nothing beyond its sight
    assert text_of(report.verdict(clean)) == "gradviz: no mistakes seen in 1 graph\n"
    assert report.diagnostics_blocks(clean) is None
    assert report.stopped_note(doc(unsupported=None)) is None
