"""The part views' graph data (rendering/view_graph.py) that report.html lays out itself: it carries every node,
edge and module box of the view's spec, under the ids dot's views carry, with user text kept as plain text."""

import base64
import json
import re
import zlib

from gradviz.rendering.graph import build_graph
from gradviz.rendering.html import html_report
from gradviz.rendering.view_graph import NODE_FIELDS, view_graph, view_graph_text
from tests.synthetic_docs import block_chain, hostile_doc


def nested_doc(blocks=4, ops=15):
    """``blocks`` module calls inside ``net``, each with a parameter and a chain of distinct ops: too big for one
    view, so the page opens each block's inside."""
    return block_chain("nested.py", blocks, ops)[0].finish()


def page_data(doc, **options):
    page = html_report(doc, view_options=options or None)
    return json.loads(re.search(r'<script type="application/json" id="gv-data">(.*?)</script>', page, re.S).group(1))


def graph_of(data, key):
    return json.loads(zlib.decompress(base64.b64decode(data["packed"][key])).decode("utf-8"))


def test_the_graph_data_carries_every_node_edge_and_box_of_the_spec():
    spec = build_graph(nested_doc(), depth=2)
    graph = view_graph(spec)
    assert [n[0] for n in graph["nodes"]] == [n.html_id for n in spec.nodes]
    assert [n[NODE_FIELDS.index("rows")] for n in graph["nodes"]] == \
        [[[r.text, int(r.bold), r.size or 0, r.color or ""] for r in n.rows] for n in spec.nodes]
    assert [(e[0], e[1]) for e in graph["edges"]] == [(e.tail, e.head) for e in spec.edges]
    names = {n[1] for n in graph["nodes"]}
    assert all(e[0] in names and e[1] in names for e in graph["edges"])
    assert [(c[0], c[1], c[2]) for c in graph["clusters"]] == [(c.name, c.html_id, c.parent) for c in spec.clusters]
    assert {n[12] for n in graph["nodes"]} - {None} <= {c[0] for c in graph["clusters"]}
    assert graph["rankdir"] == "BT" and graph["title"] == spec.title


def test_every_part_view_embeds_the_nodes_it_stands_for_and_no_layout():
    doc = nested_doc()
    data = page_data(doc)
    parts = [v for v in data["views"] if v["parent"]]
    assert parts and all(v["layout"] == "page" for v in parts)
    for view in parts:
        graph = graph_of(data, view["key"])
        drawn = {int(n[0][4:]) for n in graph["nodes"] if re.fullmatch(r"gv-n\d+", n[0])}
        block = view["title"]
        mine = {n["id"] for n in doc["nodes"] if block in (n.get("module") or [])}
        assert drawn >= mine, block                           # each op of the block, under its own id
        assert "<svg" not in json.dumps(graph)                # data, not a drawing
    # and so every node of the run is drawn in some view, found through the page's id map
    assert {int(k[1:]) for k in data["where"] if k[0] == "n"} == {n["id"] for n in doc["nodes"]}


def test_user_text_stays_plain_text_in_the_graph_data():
    doc = hostile_doc()
    spec = build_graph(doc)
    text = view_graph_text(spec)
    graph = json.loads(text)
    rows = [row[0] for n in graph["nodes"] for row in n[10]]
    # the names as the user wrote them (the page sets them with textContent), not escaped for DOT or HTML
    assert any("</script><script>alert(1)</script>" in row for row in rows)
    assert not any("&lt;" in row or "&amp;amp;" in row for row in rows)
