"""report.html caps what it embeds: the details of what its pictures show, not of every node of the run."""

import json
import re

from gradviz.rendering.html import CHART_POINTS, DIAGNOSTIC_IDS_KEPT, SEARCH_ROWS, drawn_ids, html_report, memory_chart
from tests.synthetic_docs import DocBuilder


def embedded_json(page):
    match = re.search(r'<script type="application/json" id="gv-data">(.*?)</script>', page, re.S)
    return json.loads(match.group(1))


def chain_doc(length, diagnose_all=False):
    b = DocBuilder()
    w = b.leaf("w", (4,), parameter=True)
    y = b.leaf("x", (4,), requires_grad=False)
    y = b.op("MulBackward0", [y, w], (4,))
    for _ in range(length - 1):
        y = b.op("MulBackward0", [y], (4,))
    b.backward(y)
    doc = b.finish()
    if diagnose_all:
        doc["diagnostics"] = [{"id": 0, "code": "nan-inf", "severity": "error", "message": "m", "hint": "",
                               "location": None, "related": [], "nodes": [n["id"] for n in doc["nodes"]],
                               "variables": [], "links": [], "count": 1, "details": {}}]
    return doc


# dot writes the id's hyphen as an entity in SVG; a .dot source has it plain
PICTURE = '<svg><g id="gv&#45;n2" class="node"></g><g id="gv&#45;n3" class="node"></g></svg>'
SOURCE = 'digraph { n5 [id="gv-n5"]; v1 [id="gv-v1"]; e0 [id="gv-e0"] }'


def test_drawn_ids_reads_svg_and_dot_ids():
    assert drawn_ids({"a": PICTURE, "b (DOT source)": SOURCE, "c": None}) == {"n": {2, 3, 5}, "v": {1},
                                                                                "e": {0}}


def test_only_the_drawn_nodes_and_what_they_refer_to_are_embedded_with_a_note():
    doc = chain_doc(5000)
    page = html_report(doc, svgs={"chain": PICTURE})
    data = embedded_json(page)
    assert sorted(data["nodes"]) == ["2", "3"]
    params = [str(v["id"]) for v in doc["variables"] if v["is_parameter"]]
    assert sorted(data["variables"]) == sorted(params)     # outputs are named in their node's record
    total_nodes, total_vars = len(doc["nodes"]), len(doc["variables"])
    assert data["omitted"] == {"nodes": total_nodes - 2, "variables": total_vars - len(data["variables"])}
    note = re.search(r'<p class="muted" id="cap-note">(.*?)</p>', page).group(1)
    assert note.startswith(f"This page embeds the details of 2 of {total_nodes:,} nodes and "
                           f"{len(data['variables'])} of {total_vars:,} variables")
    assert f"{total_nodes - 2:,} nodes" in note and "report.json has every record" in note


def test_the_page_grows_with_what_is_drawn_not_with_the_run():
    # beyond the search index's cap (one row per distinct op, module and line), only the counts grow
    small_page = html_report(chain_doc(SEARCH_ROWS + 1000), svgs={"chain": PICTURE})
    large = len(html_report(chain_doc(4 * SEARCH_ROWS), svgs={"chain": PICTURE}))
    assert large - len(small_page) < 2000  # a few digits; 14,000 more nodes embedded would be megabytes
    assert len(embedded_json(small_page)["search"]) == SEARCH_ROWS


def test_a_diagnostic_on_every_node_keeps_the_drawn_ones_and_a_bounded_number_of_others():
    doc = chain_doc(3000, diagnose_all=True)
    data = embedded_json(html_report(doc, svgs={"chain": '<g id="gv-n2999"></g>'}))
    kept = data["diagnostics"][0]["nodes"]
    assert kept == list(range(DIAGNOSTIC_IDS_KEPT)) + [2999]
    assert sorted(map(int, data["nodes"])) == kept


def test_a_small_run_embeds_everything_and_has_no_note():
    doc = chain_doc(3)
    ids = "".join(f'<g id="gv-n{n["id"]}"></g>' for n in doc["nodes"])
    variables = "".join(f'<g id="gv-v{v["id"]}"></g>' for v in doc["variables"])
    page = html_report(doc, svgs={"chain": f"<svg>{ids}{variables}</svg>"})
    data = embedded_json(page)
    assert len(data["nodes"]) == len(doc["nodes"]) and data["omitted"] == {"nodes": 0, "variables": 0}
    assert 'id="cap-note"' not in page


def test_the_memory_chart_keeps_each_buckets_peak_beyond_its_point_cap():
    series = [{"iteration": i, "retained_bytes": 1000 if i == 54321 else 1} for i in range(100_000)]
    chart = memory_chart({"series": series})
    points = re.search(r'id="memory-retained"[^>]*points="([^"]*)"', chart).group(1).split()
    assert len(points) == CHART_POINTS
    tops = [p for p in points if p.endswith(",14.0")]  # the peak is drawn at the chart's top
    assert len(tops) == 1


def test_skipped_pictures_and_pending_pictures_are_shown():
    doc = chain_doc(3)
    page = html_report(doc, svgs={}, skipped=[{"file": "structure-0-iter0.png", "picture": "structure 0",
                                               "reason": "dot failed: <no png>"}], pending=True)
    assert "1 picture skipped" in page
    assert "<code>structure-0-iter0.png</code> structure 0: dot failed: &lt;no png&gt;" in page
    assert 'id="pictures-pending"' in page
