"""report.html's viewer, page side: diagnostics first and sorted, what the trace did not see, the parameter
table, one view per picture with module boxes that open, a structure's alike last graph embedded once, and the
page's size on a 5,000-node run."""

import base64
import html
import json
import os
import re
import sys
import zlib

import pytest

from gradviz.rendering.html import diagnostic_order, html_report, with_code
from gradviz.rendering.layout import dot_available
from gradviz.rendering.views import SVG_BYTES_CAP, page_views
from tests.synthetic_docs import DocBuilder, block_chain, chained_models_doc, hostile_doc

needs_dot = pytest.mark.skipif(not dot_available(), reason="Graphviz dot is not installed")


def embedded_json(page):
    return json.loads(re.search(r'<script type="application/json" id="gv-data">(.*?)</script>', page, re.S).group(1))


def bar_ids(page):
    return re.findall(r'<div class="dentry" id="diag-(\d+)"', page)


def test_the_diagnostics_bar_is_first_and_sorted_by_severity_then_line():
    doc = chained_models_doc()   # a warning emitted before an error, both on one line
    doc["diagnostics"].append(dict(doc["diagnostics"][0], id=2, severity="warning", location={"file": "m.py",
                                                                                              "line": 1}))
    doc["diagnostics"].append(dict(doc["diagnostics"][0], id=3, severity="info", location=None))
    assert diagnostic_order(doc) == [1, 2, 0, 3]
    page = html_report(doc, svgs={})
    assert bar_ids(page) == ["1", "2", "0", "3"]
    assert page.index('id="diagbar"') < page.index('id="stage"') < page.index('id="memory"')
    assert embedded_json(page)["order"] == [1, 2, 0, 3]


def test_backticks_become_code_and_everything_else_stays_escaped():
    assert with_code("call `x.retain_grad()` before <b>") == "call <code>x.retain_grad()</code> before &lt;b&gt;"
    assert with_code("`<i>`") == "<code>&lt;i&gt;</code>"
    assert with_code("a ` b") == "a ` b"                       # an unpaired backtick stays
    page = html_report(hostile_doc(), svgs={})
    bar = page[page.index('id="diagbar"'):page.index("<main>")]
    assert "<script>" not in bar and "&lt;/script&gt;" in bar


def test_source_lines_link_to_the_file_and_say_where():
    doc = chained_models_doc()
    doc["diagnostics"][1]["location"]["file"] = "/home/me/seed <1>.py"
    page = html_report(doc, svgs={})
    assert ('<a class="srcloc" href="file:///home/me/seed%20%3C1%3E.py" title="/home/me/seed &lt;1&gt;.py:'
            in page)
    assert '<code class="srcline">y1.backward(y1.grad)</code>' in page


def test_what_the_trace_did_not_see_comes_first():
    doc = chained_models_doc()
    doc["unseen"] = [{"kind": "child-process", "what": "`python train.py`", "count": 2,
                      "how": "subprocess.run", "location": {"file": "run.py", "line": 7}, "advice": "run it <here>"}]
    page = html_report(doc, svgs={})
    banner = re.search(r'<section id="unseen">(.*?)</section>', page, re.S).group(1)
    assert "<b>child-process</b>: <code>python train.py</code> (×2) · subprocess.run" in banner
    assert "run.py:7" in banner and "run it &lt;here&gt;" in banner
    assert page.index('id="unseen"') < page.index('id="diagbar"')


def test_a_clean_pages_verdict_is_the_terminals_first_line():
    from gradviz.rendering.report import verdict

    doc = chained_models_doc()
    doc["diagnostics"] = []
    page = html_report(doc, svgs={})
    line = re.search(r'<p class="muted" id="no-diagnostics">([^<]*)</p>', page).group(1)
    graphs = len(doc["graphs"])
    assert line == f"gradviz: no mistakes seen in {graphs} graph{'s' * (graphs != 1)}"
    assert line == verdict(doc).renderables[0].plain


def test_a_trace_that_saw_no_graph_never_reads_as_an_all_clear():
    doc = {"nodes": [], "graphs": [], "variables": [], "diagnostics": []}
    page = html_report(doc, svgs={})
    assert "the trace saw no autograd graph at all" in page
    assert "nothing suspicious" not in page
    verdict = re.search(r'<p class="muted" id="no-diagnostics">([^<]*)</p>', page).group(1)
    assert verdict == "gradviz saw no graph: no autograd work reached the trace"   # the terminal's first line
    doc["unseen"] = [{"kind": "no-autograd", "what": "no graph", "count": 1, "how": "torch.no_grad() was on",
                      "location": None, "advice": None}]
    page = html_report(doc, svgs={})
    assert "<b>no-autograd</b>: no graph · torch.no_grad() was on" in page
    assert "the trace saw no autograd graph at all" not in page   # said once, by the document's own entry


def test_the_parameter_table_has_names_shapes_grad_norms_and_who_got_none():
    doc = chained_models_doc()
    frozen = doc["variables"][-1]
    frozen.update(is_parameter=True, name="frozen.weight")
    page = html_report(doc, svgs={})
    rows = re.findall(r'<tr data-variable="\d+"><td><code>([^<]*)</code></td><td>([^<]*)</td><td>([^<]*)</td>'
                      r'<td class="(yes|no)">', page)
    assert ("model1.weight", "(2, 3)", "0.1429", "yes") in rows
    assert rows[-1][0] == "frozen.weight" and rows[-1][3] == "no"


@needs_dot
def test_a_structures_last_graph_drawn_like_its_first_is_embedded_once_with_its_nodes_mapped():
    import gradviz
    from gradviz import nn

    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    with gradviz.trace() as tr:
        for _ in range(3):
            model(gradviz.ones(2, 3)).sum().backward()
    doc = tr.to_dict()
    views, _ = page_views(doc)
    first, last = [v for v in views if v.parent is None]
    assert (first.iteration, last.iteration) == (0, 2) and last.same_as == first.key and last.svg is None
    graphs = {g["id"]: g for g in doc["graphs"]}
    ops = {n["id"]: n["op"] for n in doc["nodes"]}
    assert sorted(last.alias) == sorted(graphs[last.graph]["nodes"])
    assert all(ops[a] == ops[f] and f in graphs[first.graph]["nodes"] for a, f in last.alias.items())
    page = html_report(doc)
    assert page.count("<template id=") == 1


def big_doc(blocks=50, ops=100):
    """5,000 nodes in 50 module calls, no two alike (nothing folds): the worst case for the page's size."""
    return block_chain("big.py", blocks, ops)[0].finish()


@needs_dot
def test_a_5000_node_run_fits_the_page_budget_with_every_module_open():
    doc = big_doc()
    page = html_report(doc)
    assert len(doc["nodes"]) == 5001 and len(page.encode("utf-8")) <= 5 * 1024 * 1024
    data = embedded_json(page)
    top = data["views"][0]
    assert top["key"] == "g0" and top["parent"] is None
    overview = re.search(r'<template id="tpl-g0">(.*?)</template>', page, re.S).group(1)
    assert len(set(re.findall(r'id="gv&#45;(b\d+)" class="node"', overview))) == 1   # the overview: net
    (net,) = [v for v in data["views"] if v["parent"] == "g0"]
    assert net["title"] == "net" and top["boxes"] == [net["box"]]
    boxes = [i for i in drawn_ids(data, net["key"]) if re.fullmatch(r"gv-b\d+", i)]
    assert len(set(boxes)) == 50   # a box per block
    inside = [v for v in data["views"] if v["parent"] == net["key"]]
    assert sorted(v["title"] for v in inside) == sorted(f"net.block{i}" for i in range(50))   # every one opens
    assert sorted(net["boxes"]) == sorted(v["box"] for v in inside)
    assert page.count("<template id=") == 1
    assert sorted(data["packed"]) == sorted([net["key"]] + [v["key"] for v in inside])
    embedded = len(overview) + sum(len(p) for p in data["packed"].values())
    assert embedded <= SVG_BYTES_CAP and "not embedded to keep the page small" not in page
    assert len(data["search"]) == 5001                 # every op reachable by search (each has its own line)
    assert reachable(doc, data) == {n["id"] for n in doc["nodes"]}


@needs_dot
def test_with_the_byte_cap_spent_by_the_pictures_no_inside_view_is_built(monkeypatch):
    # a long run's big pictures can fill the cap alone: the views their boxes open are counted, not built and
    # then thrown away (reinforce.py's page: 42 such views took 3 s and 100 MiB)
    import gradviz.rendering.views as views

    doc = big_doc(blocks=6, ops=100)
    built = []
    prepare = views._Drawer._prepare
    monkeypatch.setattr(views._Drawer, "_prepare", lambda self, job: built.append(job[2].title) or
                        prepare(self, job))
    shown, notes = page_views(doc)
    # the overview would be one box, net: it is drawn one level deeper, a box per block, each opening
    assert [v.title for v in shown if v.parent] == [f"net.block{i}" for i in range(6)]
    assert built == [f"net.block{i}" for i in range(6)]   # each built once, as graph data (the page lays it out)
    for view in shown[1:]:
        mine = {n["id"] for n in doc["nodes"] if view.title in n["module"]}
        graph = json.loads(view.graph_data)
        assert {int(n[0][4:]) for n in graph["nodes"] if n[0].startswith("gv-n")} == mine
        assert [f"{view.title}.weight", 1, 0, ""] in [row for n in graph["nodes"] for row in n[10]]
        assert view.svg is None
    built.clear()
    monkeypatch.setattr(views, "SVG_BYTES_CAP", len(shown[0].svg) + views.SMALLEST_VIEW - 1)
    shown, notes = page_views(doc)
    assert [v.key for v in shown] == ["g0"] and built == []
    assert notes == ["6 views not embedded to keep the page small (their boxes stay closed); `gradviz graph "
                     "--depth` draws them"]


def reachable(doc, data):
    """Node ids the page draws under their own id in some view, directly or through a twin's alias."""
    drawn = {int(k[1:]) for k in data["where"] if k.startswith("n")}
    for view in data["views"]:
        drawn |= {int(k) for k, v in view["alias"].items() if v in drawn}
    return drawn


def unpacked(data, key):
    """A packed view's text (a part view's graph data as JSON), as the page's script inflates it."""
    return zlib.decompress(base64.b64decode(data["packed"][key])).decode("utf-8")


def drawn_ids(data, key):
    """The element ids of the nodes a part view draws (its graph data, which the page lays out)."""
    return [node[0] for node in json.loads(unpacked(data, key))["nodes"]]


def chain_doc(ops=150):
    """One graph of ``ops`` distinct ops in a chain, no modules and nothing that folds: only ``max_nodes`` cuts
    it."""
    b = DocBuilder("chain.py")
    y = b.leaf("w", (4,), parameter=True)
    for j in range(ops):
        y = b.op(f"Op{j}Backward0", [y], (4,), text=f"y{j} = f{j}(y)")
    b.backward(y)
    return b.finish()


@needs_dot
def test_the_nodes_past_max_nodes_are_drawn_in_the_view_the_more_box_opens():
    doc = chain_doc()
    data = embedded_json(html_report(doc, view_options={"max_nodes": 60}))
    keys = [v["key"] for v in data["views"]]
    assert keys == ["g0", "g0-more", "g0-more-more"]   # 60 nodes, 60 more, the rest
    assert [v["kind"] for v in data["views"]] == ["", "more", "more"]
    assert data["views"][0]["boxes"] == ["gv-more"] and data["views"][1]["boxes"] == ["gv-more"]
    assert reachable(doc, data) == {n["id"] for n in doc["nodes"]}
    first_op = next(n["id"] for n in doc["nodes"] if n["op"] == "Op0Backward0")   # the farthest from the root
    assert data["where"][f"n{first_op}"] == "g0-more-more"
    assert f"gv-n{first_op}" in drawn_ids(data, "g0-more-more")


@needs_dot
def test_a_folded_loop_opens_unfolded_and_each_step_is_drawn_there():
    from tests.synthetic_docs import loop_doc

    doc = loop_doc(12)
    data = embedded_json(html_report(doc))
    loops = [v for v in data["views"] if v["kind"] == "loop"]
    assert len(loops) == 1 and loops[0]["parent"] == "g0" and loops[0]["box"] in data["views"][0]["boxes"]
    assert loops[0]["title"] == "loop × 12 unfolded"
    assert reachable(doc, data) == {n["id"] for n in doc["nodes"]}
    last_step = max(n["id"] for n in doc["nodes"] if n["op"] == "TanhBackward")
    assert data["where"][f"n{last_step}"] == loops[0]["key"]      # drawn in the unfolded view, not the fold
    ids = drawn_ids(data, loops[0]["key"])
    tanh = {n["id"] for n in doc["nodes"] if n["op"] == "TanhBackward"}
    assert {int(i[4:]) for i in ids if re.fullmatch(r"gv-n\d+", i)} >= tanh and len(tanh) == 12   # every step


def test_without_graphviz_the_page_shows_each_pictures_dot_source(monkeypatch):
    import gradviz.rendering.layout as layout

    monkeypatch.setattr(layout, "dot_available", lambda: False)
    page = html_report(chained_models_doc())
    template = re.search(r'<template id="tpl-g0">(.*?)</template>', page, re.S).group(1)
    assert template.startswith(f'<div class="nopic"><p>No picture: {html.escape(layout.DOT_MISSING)}</p><pre>')
    assert "digraph" in template and 'id=&quot;gv-n3&quot;' in template
    assert embedded_json(page)["views"][0]["drawn"] is False


def test_a_part_views_input_from_the_rest_of_its_graph_is_outside_the_view_not_an_earlier_graph():
    """A module's inside drawn on its own takes inputs from the graph's other nodes: those are drawn elsewhere in
    the page, not in an earlier graph, and the box claims no node id (search lands where the node is drawn)."""
    import gradviz as gv
    from gradviz.rendering.dot import to_dot
    from gradviz.rendering.graph import build_graph
    from gradviz.rendering.views import _restricted

    gv.manual_seed(0)
    model = gv.nn.Sequential(gv.nn.Linear(3, 4), gv.nn.ReLU(), gv.nn.Linear(4, 2))
    with gv.trace() as tr:
        model(gv.randn(5, 3)).sum().backward()
    doc = tr.to_dict()
    graph = doc["graphs"][0]["id"]
    relu = next(n["id"] for n in doc["nodes"] if n["op"] == "ReluBackward")
    last = [n["id"] for n in doc["nodes"] if n["id"] > relu]  # the second Linear, its leaves and the sum
    spec = build_graph(_restricted(doc, graph, last), graphs=[graph])
    source = to_dot(spec)
    assert "outside this view" in source and "not drawn" not in source and "earlier graph" not in source
    outside = [n for n in spec.nodes if n.kind == "outside"]
    assert [n.rows[0].text for n in outside] == ["ReluBackward"] and all(relu not in n.doc_nodes for n in outside)
    assert "input from outside this view (in the view it opens from)" in [e.label for e in spec.legend]


@needs_dot
def test_an_lstm_unrolled_over_35_steps_opens_and_every_op_is_drawn_under_its_own_id():
    # the model's box holds 1,058 ops in 70 cell calls whose 8 parameters were each one "input from outside"
    # hub of 35 edges: dot took 8 s on it and the view read "did not lay out within the 4.0 s budget"
    pytest.importorskip("torch")
    sys.path.insert(0, os.path.dirname(__file__))
    from viewer_models import unrolled_lstm_lm_doc

    doc = unrolled_lstm_lm_doc()
    data = embedded_json(html_report(doc))
    assert [v["key"] for v in data["views"] if not v["drawn"]] == []
    assert [v["error"] for v in data["views"] if v["error"]] == []
    # the overview: the model's box would be all of it, so its inside, the 70 cell calls folded "× 35"
    top = [v["title"] for v in data["views"] if v["parent"] == "g0"]
    assert top == ["model.encoder", "model.cells.0 → model.cells.1 × 35", "model.decoder"]
    fold = next(v for v in data["views"] if v["parent"] == "g0" and v["title"].endswith("× 35"))
    below, todo = [], [fold["key"]]
    while todo:  # every view the fold opens, level by level
        key = todo.pop()
        children = [v for v in data["views"] if v["parent"] == key]
        below += children
        todo += [v["key"] for v in children]
    cells = sorted(v["title"] for v in below if v["title"].startswith("model.cells."))
    assert cells == ["model.cells.0"] * 35 + ["model.cells.1"] * 35   # unfolded, each call opens
    assert all(v["parent"] == fold["key"] for v in below if v["title"].startswith("model.cells."))  # one click
    assert reachable(doc, data) == {n["id"] for n in doc["nodes"]}


def test_the_parameter_table_is_the_models_not_a_template_layer_transformer_encoder_copied():
    # TransformerEncoder deep-copies the layer it is given: the template's 12 parameters are made inside the
    # trace but never called, read or optimized, and once read as 12 unnamed rows in red "no"
    torch = pytest.importorskip("torch")
    from torch import nn

    import gradviz

    with gradviz.trace(engine="torch") as tr:
        layer = nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, dropout=0.0, batch_first=True)
        model = nn.Sequential(nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False), nn.Linear(8, 1))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        optimizer.zero_grad()
        nn.functional.mse_loss(model(torch.randn(2, 3, 8)), torch.randn(2, 3, 1)).backward()
        optimizer.step()
    doc = tr.to_dict()
    assert sum(1 for v in doc["variables"] if v.get("is_parameter")) == 26 + 12
    page = html_report(doc, svgs={})
    table = re.search(r'<table id="parameters".*?</table>', page, re.S).group(0)
    names = re.findall(r"<td><code>([^<]*)</code>", table)
    assert sorted(html.unescape(n) for n in names) == sorted("model." + n for n, _ in model.named_parameters())
    assert 'class="no"' not in table
    assert "12 more <code>nn.Parameter</code>s made by the script but never called" in page
