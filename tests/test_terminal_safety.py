"""Names, paths and messages in a document are the script's data: the terminal report shows them inert —
control characters escaped, never parsed as rich markup (gradviz.document.terminal_safe, one place)."""

import io
import os
import subprocess
import sys

import pytest
from rich.console import Console

from gradviz.document import terminal_safe
from gradviz.rendering.report import summary, terminal_report
from tests.synthetic_docs import chained_models_doc

HOSTILE = "w\x1b[2J\x1b]0;pwned\x07\r\x9b31m\u202eevil\ud800[/][bold]x"


def printed(doc, width=200):
    """What a real terminal would receive (colours on), as text."""
    out = io.StringIO()
    console = Console(file=out, width=width, force_terminal=True, color_system="standard")
    for part in terminal_report(doc):
        console.print(part)
    return out.getvalue()


def control_characters(text):
    """Every control character in ``text`` that is not rich's own styling (ESC [ … m) or a line break."""
    import re

    plain = re.sub(r"\x1b\[[0-9;]*m", "", text)
    return sorted({c for c in plain if (ord(c) < 32 and c != "\n") or 0x7f <= ord(c) <= 0x9f
                   or 0x202a <= ord(c) <= 0x202e or 0xd800 <= ord(c) <= 0xdfff})


@pytest.mark.parametrize("text,shown", [
    ("\x1b[2J", "\\x1b[2J"), ("a\rb", "a\\rb"), ("bell\x07", "bell\\x07"), ("\x9b1m", "\\x9b1m"),
    ("x\ny", "x\\ny"), ("tab\t", "tab\\t"), ("\u202egnp.exe", "\\u202egnp.exe"), ("\ud800", "\\ud800"),
    ("\x7f", "\\x7f"), ("plain ünïcode → ok", "plain ünïcode → ok"), (None, None), (3, "3"),
])
def test_terminal_safe_escapes_control_characters_only(text, shown):
    assert terminal_safe(text) == shown


def test_hostile_names_paths_and_messages_reach_the_terminal_inert():
    doc = chained_models_doc()
    doc["script"] = "/tmp/" + HOSTILE + ".py"
    parameter = next(v for v in doc["variables"] if v.get("is_parameter"))
    parameter["name"] = "model." + HOSTILE
    doc["backwards"][0]["leaf_grad_norms"].pop(str(parameter["id"]), None)  # listed among those without a grad
    diag = doc["diagnostics"][0]
    diag["message"] = "message " + HOSTILE
    diag["hint"] = "hint " + HOSTILE
    diag["location"] = dict(diag["location"], file="/tmp/" + HOSTILE + ".py", text="y = " + HOSTILE)
    out = printed(doc)
    assert control_characters(out) == []
    escaped = terminal_safe(HOSTILE)
    assert escaped == "w\\x1b[2J\\x1b]0;pwned\\x07\\r\\x9b31m\\u202eevil\\ud800[/][bold]x"
    for shown in ("model." + escaped, "message " + escaped, "hint " + escaped, "y = " + escaped, escaped + ".py:"):
        assert shown in out, shown


def test_hostile_severities_and_unseen_entries_reach_the_verdict_inert():
    doc = chained_models_doc()
    for diag in doc["diagnostics"]:
        diag["severity"] = HOSTILE
    out = printed(doc)
    assert control_characters(out) == []
    assert f"gradviz: 2 mistakes found (2 {terminal_safe(HOSTILE)}s)" in out
    doc = chained_models_doc()
    doc["diagnostics"], doc["graphs"], doc["nodes"], doc["backwards"], doc["structures"] = [], [], [], [], []
    doc["unseen"] = [{"kind": "no-autograd", "what": "autograd work", "count": 1, "how": HOSTILE,
                      "advice": "advice " + HOSTILE, "location": None}]
    out = printed(doc)
    assert control_characters(out) == []
    escaped = terminal_safe(HOSTILE)
    assert "gradviz saw no graph: " + escaped in out and "advice: advice " + escaped in out


def test_markup_in_a_name_is_shown_literally():
    doc = chained_models_doc()
    doc["variables"][0]["name"] = "[/][red]model1.weight"
    doc["variables"][0].update(is_parameter=True, requires_grad=True)  # listed: it got no gradient
    doc["backwards"][0]["leaf_grad_norms"].pop(str(doc["variables"][0]["id"]), None)
    doc["script"] = "[bold]train[/bold].py"
    console = Console(width=200, record=True, color_system=None)
    console.print(summary(doc))
    out = console.export_text()
    assert "[/][red]model1.weight" in out and "[bold]train[/bold].py" in out


def test_gradviz_run_escapes_a_hostile_module_name_and_script_path(tmp_path):
    script = tmp_path / "t\x1b[31mrain\r.py"
    script.write_text(
        "import gradviz as torch\n"
        "model = torch.nn.Sequential()\n"
        "model.add_module('l\\x1b]0;pwned\\x07', torch.nn.Linear(2, 1))\n"
        "w = torch.ones(1, requires_grad=True)\n"  # the layer's output cut: its parameters listed without a gradient
        "loss = (model(torch.randn(3, 2)).detach() * w).sum()\n"
        "loss.backward()\n", encoding="utf-8")
    env = dict(os.environ, COLUMNS="200")
    done = subprocess.run([sys.executable, "-m", "gradviz", "run", "--no-render", "--out", str(tmp_path / "out"),
                           str(script)], capture_output=True, text=True, timeout=120, check=False, env=env,
                          cwd=tmp_path, errors="surrogateescape")
    assert done.returncode == 0, done.stderr
    report = done.stdout.split("Wrote ")[0]  # the report; the file list after it is the CLI's own lines
    assert control_characters(report) == []
    assert "t\\x1b[31mrain\\r.py" in report
    assert "l\\x1b]0;pwned\\x07.weight" in report
