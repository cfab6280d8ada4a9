"""``%load_ext gradviz`` and the ``%%gradviz`` cell magic, in a real notebook executed by nbclient on a real
IPython kernel: the cell's output has the verdict, each diagnostic at its line of the cell, and report.html's
viewer inline (self-contained, in a sandboxed frame). Each planted mistake is in the cell's one iteration, and the
cells pass --full so no light-mode sampling enters the test."""

import html
import json
import re

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

PLANTED = """%%gradviz --full
import gradviz as torch
w = torch.randn(3, requires_grad=True) * 0.1
(w * 2).sum().backward()
print("grad:", w.grad)  # planted: none-grad at cell line 5"""

CLEAN = """%%gradviz --full
import gradviz as torch
v = torch.randn(3, requires_grad=True)
(v * 2).sum().backward()
print("grad:", v.grad.tolist())"""

RAISES = """%%gradviz --full --out {out}
import gradviz as torch
y = torch.randn(3, requires_grad=True) * 2
y.backward()  # a non-scalar backward: raises at cell line 4"""

AFTER = """print(len(_gradviz_trace.diagnostics), w.grad is None)"""

BAD_OPTION = """%%gradviz --engine tensorflow
print("not run")"""


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    out = tmp_path_factory.mktemp("magic-report")
    cells = ["%load_ext gradviz", PLANTED, CLEAN, RAISES.format(out=out), AFTER, BAD_OPTION]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=300, allow_errors=True,
                                     resources={"metadata": {"path": str(out)}})
    client.execute()
    return nb, out


def stdout(nb, number):
    return "".join(o.text for o in outputs(nb, number) if o.output_type == "stream" and o.name == "stdout")


def outputs(nb, number):
    return nb.cells[number].outputs


def shown(nb, number):
    (display,) = [o for o in outputs(nb, number) if o.output_type == "display_data"]
    return display.data


def test_the_planted_cell_shows_its_verdict_diagnostic_and_line(executed):
    nb, _ = executed
    stream = stdout(nb, 1)
    assert stream == "grad: None\n"  # the cell ran, its own output first
    data = shown(nb, 1)
    text = data["text/plain"].splitlines()
    assert text[0] == "gradviz: 1 mistake found (1 warning)"
    assert re.fullmatch(r"  none-grad \(warning\) at cell line 5: `w.grad` is None: .*", text[1])
    assert "<b>gradviz: 1 mistake found (1 warning)</b>" in data["text/html"]
    assert "<code>none-grad</code> at cell line 5" in data["text/html"]


def test_the_graph_is_report_htmls_viewer_inline_and_self_contained(executed):
    nb, _ = executed
    page_html = shown(nb, 1)["text/html"]
    (srcdoc,) = re.findall(r'<iframe class="gradviz-viewer" sandbox="allow-scripts" [^>]*srcdoc="([^"]*)"', page_html)
    page = html.unescape(srcdoc)
    assert page.startswith("<!DOCTYPE html>")
    assert 'id="stage"' in page and 'id="inspector"' in page  # the viewer's parts, as in report.html
    data = json.loads(re.search(r'<script type="application/json" id="gv-data">(.*?)</script>', page, re.S).group(1)
                      .replace("<\\/", "</"))
    assert data["views"]  # the graph is there to draw
    assert not re.search(r'<(script|link)[^>]+(src|href)="(https?:)?//', page)  # nothing fetched from elsewhere
    # the kernel's own threads (IOPub, Heartbeat, ...) are not listed as unseen in every cell's report
    assert "Not seen by this trace" not in page and "Heartbeat" not in page


def test_a_clean_cell_says_nothing_was_found(executed):
    nb, _ = executed
    assert stdout(nb, 2) == "grad: [2.0, 2.0, 2.0]\n"
    data = shown(nb, 2)
    assert data["text/plain"] == "gradviz: no mistakes seen in 1 graph"


def test_a_cell_that_raises_shows_the_report_then_its_traceback(executed):
    nb, out = executed
    kinds = [o.output_type for o in outputs(nb, 3)]
    assert kinds == ["display_data", "error"]
    text = shown(nb, 3)["text/plain"].splitlines()
    assert text[0] == "gradviz: 1 mistake found (1 error)"
    assert text[1].startswith("  nonscalar-backward (error) at cell line 4: ")
    assert text[-1] == f"report.json and report.html written to {out}"
    error = outputs(nb, 3)[1]
    assert error.ename == "NonScalarBackwardError"
    assert any(re.search(r"^\S*----> 4\S* y\.backward\(\)", re.sub(r"\x1b\[[0-9;]*m", "", line), re.M)
               for line in error.traceback)  # the cell's line 4, as the notebook numbers it
    assert "gradviz/notebook.py" not in "".join(error.traceback)  # the traceback starts at the cell
    report = json.loads((out / "report.json").read_text())
    assert [(d["code"], d["location"]["line"]) for d in report["diagnostics"]] == [("nonscalar-backward", 4)]


def test_the_trace_stays_in_the_namespace_and_the_cells_variables_too(executed):
    nb, _ = executed
    assert stdout(nb, 4) == "1 True\n"


def test_a_bad_option_is_one_line_and_the_cell_does_not_run(executed):
    nb, _ = executed
    text = stdout(nb, 5)
    assert text == ("%%gradviz: argument --engine: invalid choice: 'tensorflow' (choose from 'auto', 'gradviz', "
                    "'torch')\n")


def test_only_the_kernels_threads_are_left_out_of_unseen():
    from gradviz.notebook import without_kernel_threads

    entry = {"kind": "thread", "what": "threads running beside the trace (IOPub, loader)", "count": 2,
             "how": "already running", "location": None, "advice": "start them inside"}
    doc = {"threads": {"observed": [], "unobserved": [{"name": "IOPub", "ident": 1}, {"name": "loader", "ident": 7}],
                       "note": "2 thread(s)"},
           "unseen": [{"kind": "child", "what": "x", "count": 1}, entry]}
    doc = without_kernel_threads(doc, kernel_threads={1})
    assert doc["threads"]["unobserved"] == [{"name": "loader", "ident": 7}]
    assert doc["unseen"] == [{"kind": "child", "what": "x", "count": 1},
                             dict(entry, what="threads running beside the trace (loader)", count=1)]
    doc = without_kernel_threads(doc, kernel_threads={7})
    assert doc["unseen"] == [{"kind": "child", "what": "x", "count": 1}] and "note" not in doc["threads"]
