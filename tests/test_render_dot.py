"""to_dot: deterministic text (golden files) and escaping that no name can break."""

import os
import re
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from gradviz.rendering.dot import html_escape, quote, to_dot
from gradviz.rendering.graph import build_graph
from gradviz.rendering.layout import dot_available
from tests.synthetic_docs import chained_models_doc, hostile_doc, loop_doc, residual_doc

GOLDEN = Path(__file__).parent / "render_golden"
needs_dot = pytest.mark.skipif(not dot_available(), reason="Graphviz dot is not installed")

CASES = {
    "chained_models": lambda: build_graph(chained_models_doc(), show_saved=True, show_grads=True),
    "chained_models_forward": lambda: build_graph(chained_models_doc(), forward=True),
    "loop_folded": lambda: build_graph(loop_doc(50)),
    # the layout fixes: parameters on their op's rank (minlen=0: no staircase), left to right, architecture
    "residual_blocks": lambda: build_graph(residual_doc(2), fold_loops=False),
    "residual_lr": lambda: build_graph(residual_doc(2), fold_loops=False, rankdir="LR"),
    "residual_architecture": lambda: build_graph(residual_doc(2), architecture=True),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_dot_matches_golden_file(name):
    text = to_dot(CASES[name]())
    path = GOLDEN / f"{name}.dot"
    if os.environ.get("GRADVIZ_UPDATE_GOLDEN"):
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8"), f"regenerate with GRADVIZ_UPDATE_GOLDEN=1 if intended: {path}"


def test_same_document_same_text_and_no_python_ids():
    first, second = to_dot(build_graph(chained_models_doc())), to_dot(build_graph(chained_models_doc()))
    assert first == second
    assert "0x" not in first and str(id(first))[:6] not in first


def test_html_escape_and_quote():
    assert html_escape('a<b>&"c\'') == "a&lt;b&gt;&amp;&quot;c&#39;"
    assert html_escape("x\ny") == 'x<BR ALIGN="CENTER"/>y'
    assert html_escape("bell\x07\x00") == "bell\ufffd\ufffd"
    assert html_escape("[]") == "&#91;&#93;"
    assert html_escape("\ud800") == "?"                    # a lone surrogate cannot reach the file
    assert quote('say "hi"\\n\nnext') == '"say \\"hi\\"\\\\n\\nnext"'


def test_hostile_names_never_appear_raw_in_dot():
    text = to_dot(build_graph(hostile_doc(), show_saved=True, forward=False))
    # Quoted strings (tooltips) hold the text literally, with quotes and backslashes escaped…
    quoted = re.findall(r'tooltip="((?:[^"\\\n]|\\.)*)"', text)
    assert any('w\\"</script><script>alert(1)</script>&amp;\\\\n\\n<b>' in q for q in quoted)
    # …and everything else (HTML-like labels) has no raw markup from the user at all.
    bare = re.sub(r'tooltip="(?:[^"\\\n]|\\.)*"', "", text)
    assert "</script>" not in bare and "<script>" not in bare and "\x07" not in text
    assert 'w&quot;&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;&amp;amp;\\n<BR ALIGN="CENTER"/>' in text
    assert "ünï☃" in text                                   # unicode passes through as UTF-8
    for line in text.splitlines():
        if "tooltip=" in line:
            tooltip = line.split("tooltip=", 1)[1]
            assert tooltip.startswith('"') and tooltip.rstrip("]").endswith('"')


@needs_dot
@pytest.mark.parametrize("forward", [False, True])
def test_hostile_names_lay_out_and_come_back_intact(forward):
    text = to_dot(build_graph(hostile_doc(), show_saved=True, show_grads=True, forward=forward))
    done = subprocess.run(["dot", "-Tsvg"], input=text.encode("utf-8"), capture_output=True, timeout=30)
    assert done.returncode == 0, done.stderr.decode()
    assert b"Warning" not in done.stderr and b"Error" not in done.stderr, done.stderr.decode()
    root = ET.fromstring(done.stdout)                      # well-formed XML
    words = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text") if t.text]
    name_rows = 'w"</script><script>alert(1)</script>&amp;\\n'
    assert name_rows in words and "<b>ünï☃</b>\ufffd" in words
    ids = [g.get("id") for g in root.iter("{http://www.w3.org/2000/svg}g") if g.get("class") == "node"]
    assert "gv-n0" in ids if not forward else "gv-v0" in ids
