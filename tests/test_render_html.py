"""report.html and the Jupyter fragment: self-contained, escaped, with the data the inspector needs."""

import json
import re

import pytest

from gradviz.rendering import notebook_html
from gradviz.rendering.html import html_report, inline_svg, json_for_script, memory_chart, report_data
from gradviz.rendering.layout import dot_available
from tests.synthetic_docs import DocBuilder, chained_models_doc, hostile_doc

FAKE_SVG = '<?xml version="1.0"?>\n<!DOCTYPE svg>\n<!-- c -->\n<svg><g id="gv-n3" class="node"></g></svg>'


def embedded_json(page):
    match = re.search(r'<script type="application/json" id="gv-data">(.*?)</script>', page, re.S)
    return json.loads(match.group(1))


def test_json_cannot_break_out_of_its_script_block():
    text = json_for_script({"name": "</script><script>alert(1)</script><!--\u2028&"})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == {"name": "</script><script>alert(1)</script><!--\u2028&"}


def test_hostile_document_is_fully_escaped():
    page = html_report(hostile_doc(), svgs={'<img src=x onerror=alert(1)>': FAKE_SVG})
    # Only our own two script blocks exist; every user string is escaped text.
    assert len(re.findall(r"<script", page)) == 2 and len(re.findall(r"</script>", page)) == 2
    assert "<img" not in page and "onerror=alert(1)" not in page.split('id="gv-data">')[0]  # title: JSON only
    assert "print(y.grad) # &lt;/script&gt;&lt;!--" in page
    assert embedded_json(page)["views"][0]["title"] == '<img src=x onerror=alert(1)>'
    assert "<b>ünï☃</b>" not in page and "&lt;b&gt;ünï☃&lt;/b&gt;" in page
    data = embedded_json(page)
    assert data["diagnostics"][0]["message"].startswith('w"</script><script>alert(1)</script>')


def test_page_is_self_contained():
    page = html_report(chained_models_doc(), svgs={"g": FAKE_SVG})
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)
    assert "@import" not in page and "fetch(" not in page
    assert '<svg><g id="gv-n3" class="node"></g></svg>' in page and "<?xml" not in page


def test_inspector_data_for_nodes_variables_and_diagnostics():
    data = report_data(chained_models_doc())
    y1_node = data["nodes"][3]
    assert y1_node["op"] == "AddmmBackward" and y1_node["shape"] == [4, 2] and y1_node["dtype"] == "float32"
    assert y1_node["bytes"] == 32 and y1_node["output_names"] == ["y1"] and y1_node["module"] == ["model1"]
    assert y1_node["location"]["text"] == "y1 = model1(X)"
    assert [(s["name"], s["shape"], s["version"]) for s in y1_node["saved"]] == [("X", [4, 3], 0),
                                                                                 ("T of model1", [3, 2], 0)]
    assert y1_node["grad_norm"] == pytest.approx(0.2) and y1_node["diagnostics"] == [0, 1]
    assert data["nodes"][0]["variable_name"] == "model1.weight"
    assert data["diagnostics"][1]["nodes"] == [3] and data["diagnostics"][1]["severity"] == "error"
    assert data["events"] == {0: {"variable": 6}}


def test_memory_chart_draws_retained_bytes_live_graphs_and_the_documents_peak():
    b = DocBuilder()
    for _ in range(3):
        w = b.leaf("w", [250], parameter=True)
        b.backward(b.op("SumBackward", [b.op("ExpBackward", [w], [250], saved=[w])], []), retain_graph=True)
        b.next_iteration()
    memory = b.finish()["memory"]
    assert [s["retained_bytes"] for s in memory["series"]][:3] == [1000, 2000, 3000]
    chart = memory_chart(memory)
    assert chart.startswith('<svg id="memory-chart"') and f'data-peak-bytes="{memory["peak_retained_bytes"]}"' in chart
    assert ">peak 2.9 KiB</text>" in chart
    points = re.search(r'id="memory-retained"[^>]*points="([^"]+)"', chart).group(1).split()
    ys = [float(p.split(",")[1]) for p in points]
    assert ys == sorted(ys, reverse=True) and len(ys) == 4
    peak_y = float(re.search(r'id="memory-peak" x1="[^"]+" y1="([^"]+)"', chart).group(1))
    assert peak_y == min(ys) == 14.0                      # the highest point touches the peak line at the top
    graphs = re.search(r'id="memory-graphs"[^>]*points="([^"]+)"', chart).group(1).split()
    assert len(graphs) == 4
    assert memory_chart({}) == ""


def test_a_peak_between_iteration_ends_is_drawn_above_every_point_and_explained():
    # what `total_loss += loss` gives on real PyTorch: every point after backward freed the saved tensors is 0
    memory = {"peak_retained_bytes": 11264, "final_retained_bytes": 0,
              "series": [{"iteration": i, "retained_bytes": 0, "graphs_alive": 1 + i} for i in range(8)]}
    chart = memory_chart(memory)
    assert 'data-peak-bytes="11264"' in chart and ">peak 11.0 KiB</text>" in chart
    assert 'id="memory-peaks"' not in chart and 'id="memory-peak-at"' not in chart   # no point says where
    graphs = re.search(r'id="memory-graphs"[^>]*points="([^"]+)"', chart).group(1).split()
    ys = [float(p.split(",")[1]) for p in graphs]
    assert ys == sorted(ys, reverse=True) and ys[0] > ys[-1]     # live graphs climb 1 -> 8
    page = html_report({"memory": memory, "graphs": [], "nodes": []}, svgs={})
    assert 'id="memory-note"' in page and "The peak was reached inside an iteration" in page


def test_each_iterations_own_peak_is_drawn_and_the_runs_peak_is_dotted_on_its_iteration():
    memory = {"peak_retained_bytes": 3000, "final_retained_bytes": 0,
              "series": [{"iteration": i, "retained_bytes": 0, "graphs_alive": 1,
                          "peak_retained_bytes": 3000 if i == 5 else 1000} for i in range(8)]}
    chart = memory_chart(memory)
    assert ">peak 2.9 KiB (iteration 5)</text>" in chart
    dot = re.search(r'<circle id="memory-peak-at" cx="([^"]+)" cy="([^"]+)"[^>]*data-iteration="5"', chart)
    peaks = re.search(r'id="memory-peaks"[^>]*points="([^"]+)"', chart).group(1).split()
    assert peaks[5] == f"{dot.group(1)},{dot.group(2)}" and float(dot.group(2)) == 14.0
    assert len({p.split(",")[1] for p in peaks}) == 2


def test_inline_svg_refuses_scripts():
    with pytest.raises(ValueError, match="script"):
        inline_svg("<svg><script>alert(1)</script></svg>")


@pytest.mark.skipif(not dot_available(), reason="Graphviz dot is not installed")
def test_default_pictures_and_notebook_fragment():
    page = html_report(chained_models_doc())
    assert 'id="gv-n3" class="node"' in page.replace("&#45;", "-")
    views = embedded_json(page)["views"]
    assert views[0]["title"] == "structure 0, iteration 0 · graph 0"   # as the summary and the file names say
    assert '<template id="tpl-g0"><svg' in page
    fragment = notebook_html(chained_models_doc())
    assert fragment.startswith('<div class="gradviz-trace">') and "<svg" in fragment
    assert "<code>nonscalar-backward</code>" in fragment
