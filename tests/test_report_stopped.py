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
    text = text_of(report.diagnostics_table(doc()))
    assert text == ("The run stopped at train.py:7: `torch.fft` is not supported by gradviz's engine. No diagnostics "
                    "before that point; nothing after it was checked.\n")


def test_diagnostics_found_before_the_stop_are_followed_by_the_note():
    text = text_of(report.diagnostics_table(doc([DIAG])))
    assert text.startswith("Diagnostics (1)")
    assert text.rstrip().endswith(
        "The run stopped at train.py:7: `torch.fft` is not supported by gradviz's engine. The diagnostics above "
        "cover the code before that point; nothing after it was checked.")


def test_a_complete_run_without_diagnostics_still_says_nothing_was_found():
    clean = {"diagnostics": [], "status": {"completed": True, "exception": None}, "backwards": [{"id": 0}],
             "unseen": []}  # a run that saw a backward and nothing beyond its sight
    assert text_of(report.diagnostics_table(clean)) == "No diagnostics: nothing suspicious was found.\n"
    assert report.stopped_note(doc(unsupported=None)) is None
