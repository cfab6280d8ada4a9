"""report.html's overview folds repeated module boxes "× N" (a stack of layers, a loop calling the same modules),
draws a module of ops only as a box, keeps diagnosed nodes and the loss out of any fold, and goes one level
deeper when it would be a single box (gradviz/rendering/fold_boxes.py, overview.py)."""

import os
import re
import sys

import pytest

from gradviz.rendering.graph import build_graph
from gradviz.rendering.layout import dot_available
from gradviz.rendering.overview import MIN_TEXT_PX, compact, overview, pinned_nodes, run_dot_each
from tests.synthetic_docs import DocBuilder

needs_dot = pytest.mark.skipif(not dot_available(), reason="Graphviz dot is not installed")


def stack_doc(blocks=5, ops=3, diagnosed_block=None):
    """``net`` holding ``blocks`` calls of identical ``net.layers.i`` (Block) modules, chained, then a head
    (``net.head``, Linear: ops only) and the loss; a diagnostic on an op of ``diagnosed_block``."""
    b = DocBuilder("stack.py")
    b.module("net", "Net")
    y, diagnosed = b.leaf("x", (4,), requires_grad=False), None
    for i in range(blocks):
        path = f"net.layers.{i}"
        b.module(path, "Block")
        y = b.op("MulBackward0", [y, b.leaf(f"{path}.weight", (4,), parameter=True)], (4,), module=["net", path])
        for j in range(ops - 1):
            y = b.op(f"Op{j}Backward0", [y], (4,), module=["net", path])
            if i == diagnosed_block and j == 0:
                diagnosed = b.variables[y]["node"]
    b.module("net.head", "Linear")
    y = b.op("MmBackward0", [y, b.leaf("net.head.weight", (4, 2), parameter=True)], (2,), module=["net", "net.head"])
    y = b.op("AddBackward0", [y, b.leaf("net.head.bias", (2,), parameter=True)], (2,), module=["net", "net.head"])
    b.backward(b.op("SumBackward0", [y], ()))
    if diagnosed is not None:
        b.diagnostic("nan-inf", "warning", "`y` overflows", nodes=[diagnosed], line=3, text="y = f(y)")
    return b.finish(), diagnosed


def compacted(doc, depth):
    """The overview's picture at ``depth`` (as ``overview`` draws it: ops not folded, repeats folded as boxes)."""
    accumulators = {n["id"] for n in doc["nodes"] if n["op"] == "AccumulateGrad"}
    spec = build_graph(doc, graphs=[0], depth=depth, fold_loops=False)
    return compact(spec, depth, accumulators, pinned_nodes(doc, 0))


def titles(spec):
    return [node.rows[0].text for node in spec.nodes if node.kind in ("module", "op")]


def test_a_stack_of_identical_blocks_is_one_box_that_stands_for_all_of_them():
    doc, _ = stack_doc()
    spec = compacted(doc, 2)
    assert titles(spec) == ["net.layers.0–4 (Block) × 5", "net.head (Linear)", "SumBackward0"]
    fold, head = spec.nodes[0], spec.nodes[1]
    blocks = {n["id"] for n in doc["nodes"] if any(p.startswith("net.layers.") for p in n["module"])}
    assert set(fold.doc_nodes) == blocks and len(fold.doc_nodes) == len(blocks)
    assert fold.rows[1].text == "5 blocks · 15 ops · 5 parameters"
    assert head.rows[1].text == "2 ops · 2 parameters" and head.kind == "module"
    # boxes of their own: never a document id, which the page would take for the node itself
    assert fold.html_id.startswith("gv-b") and head.html_id.startswith("gv-b")
    names = {node.name for node in spec.nodes}
    edges = {(e.tail, e.head) for e in spec.edges}
    assert all(tail in names and head_ in names and tail != head_ for tail, head_ in edges)
    assert (head.name, fold.name) in edges or (fold.name, head.name) in edges   # the stack feeds the head
    assert spec.caption == ("overview: modules below depth 2 as boxes, repeated ones folded × N; click a box to "
                            "open it")
    assert (spec.title, spec.subtitle, spec.legend) == ("", [], [])  # said above the stage, not in the picture


def test_a_diagnosed_block_stays_in_sight_between_the_folds():
    doc, diagnosed = stack_doc(blocks=6, diagnosed_block=2)
    spec = compacted(doc, 1)  # the blocks as boxes: the diagnosed one alone
    assert titles(spec) == ["net.layers.0–1 (Block) × 2", "net.layers.2 (Block)", "net.layers.3–5 (Block) × 3",
                            "net.head (Linear)", "SumBackward0"]
    (holder,) = [node for node in spec.nodes if diagnosed in node.doc_nodes]
    assert holder.rows[0].text == "net.layers.2 (Block)"
    spec = compacted(doc, 2)  # the blocks as their ops: the others boxed and folded, the diagnosed one's ops drawn
    assert titles(spec) == ["net.layers.0–1 (Block) × 2", "MulBackward0", "Op0Backward0", "Op1Backward0",
                            "net.layers.3–5 (Block) × 3", "net.head (Linear)", "SumBackward0"]
    (holder,) = [node for node in spec.nodes if diagnosed in node.doc_nodes]
    assert (holder.rows[0].text, holder.doc_nodes) == ("Op0Backward0", [diagnosed])


def test_a_module_of_ops_holding_a_diagnosed_op_is_not_boxed():
    doc, _ = stack_doc(blocks=4)
    head_op = next(n["id"] for n in doc["nodes"] if n["op"] == "MmBackward0")
    doc["diagnostics"] = [{"id": 0, "code": "nan-inf", "severity": "warning", "message": "m", "nodes": [head_op],
                           "variables": [], "location": None}]
    spec = compacted(doc, 2)
    assert titles(spec)[0] == "net.layers.0–3 (Block) × 4" and "net.head (Linear)" not in titles(spec)
    assert "MmBackward0" in titles(spec)


@needs_dot
def test_an_overview_that_would_be_one_box_is_drawn_one_level_deeper():
    doc, _ = stack_doc(blocks=8, ops=14)  # depth 1: net alone; depth 2: too tall to read at fit
    found = overview(doc, 0, lambda sources: run_dot_each(sources, 10.0))
    spec, _, _, depth = found
    assert depth == 2 and "net (Net)" not in titles(spec)
    assert titles(spec) == ["net.layers.0–7 (Block) × 8", "net.head (Linear)", "SumBackward0"]


@needs_dot
def test_a_real_transformers_four_layers_are_one_legible_box_on_the_first_screen():
    pytest.importorskip("torch")
    sys.path.insert(0, os.path.dirname(__file__))
    from viewer_models import transformer_doc

    from gradviz.rendering.overview import text_px_at_fit

    doc = transformer_doc(layers=4, iterations=1)
    spec, _, svg, depth = overview(doc, 0, lambda sources: run_dot_each(sources, 10.0))
    assert titles(spec) == ["model.0.layers.0–3 (TransformerEncoderLayer) × 4", "model.1 (Linear)",
                            "MseLossBackward0"]
    assert depth == 2 and text_px_at_fit(svg) >= MIN_TEXT_PX
    ops = {n["id"] for n in doc["nodes"] if n["op"] != "AccumulateGrad"}
    layers = {n["id"] for n in doc["nodes"] if n["graph"] == 0 and any(".layers." in p for p in n["module"])}
    assert set(spec.nodes[0].doc_nodes) & ops == layers & ops


@needs_dot
def test_an_lstm_unrolled_over_35_steps_is_its_two_cells_folded_35_times():
    pytest.importorskip("torch")
    sys.path.insert(0, os.path.dirname(__file__))
    from viewer_models import unrolled_lstm_lm_doc

    doc = unrolled_lstm_lm_doc()
    spec, _, _, depth = overview(doc, 0, lambda sources: run_dot_each(sources, 10.0))
    # depth 0 would be one box, "model (LM)": one level deeper, its 70 cell calls are one fold of 35 steps
    assert depth == 1
    assert titles(spec) == ["model.encoder (Embedding)", "UnbindBackward0", "model.cells.0 → model.cells.1 × 35",
                            "StackBackward0", "model.decoder (Linear)", "ViewBackward0", "LogSoftmaxBackward0",
                            "NllLossBackward0"]
    cells = {n["id"] for n in doc["nodes"] if any(p.startswith("model.cells.") for p in n["module"])
             and n["op"] != "AccumulateGrad"}
    assert cells <= set(spec.nodes[2].doc_nodes)
    assert spec.nodes[2].rows[1].text.startswith("35 steps · 1,050 ops")


@needs_dot
def test_a_depth_asked_for_is_kept_and_the_page_says_it_is_not_legible():
    from gradviz.rendering.html import html_report

    doc, _ = stack_doc(blocks=8, ops=14)
    page = html_report(doc, view_options={"depth": 3})  # every op drawn: too small to read at fit
    top = page.split('<template id="tpl-g0">', 1)[1].split("</template>", 1)[0]
    assert "Op12Backward0" in top and "(Block) × 8" not in top  # the picture asked for, not the overview
    note = re.search(r"graph 0 is drawn at depth 3, as asked: its text is ([\d.]+) px at fit, below the 10 px that "
                     r"reads; zoom in, or ask for a smaller depth", page)
    assert note and float(note.group(1)) < MIN_TEXT_PX
    page = html_report(doc)  # not asked: the overview
    top = page.split('<template id="tpl-g0">', 1)[1].split("</template>", 1)[0]
    assert "net.layers.0–7 (Block) × 8" in top and "as asked" not in page


@needs_dot
def test_an_overview_the_estimate_took_for_legible_is_drawn_one_depth_up_when_dot_draws_it_smaller(monkeypatch):
    import gradviz.rendering.overview as overview_module

    doc, _ = stack_doc(blocks=6, ops=12, diagnosed_block=2)  # depth 2: the diagnosed block's 12 ops in a column
    laid = []

    def run(sources):
        laid.append(len(sources))
        return run_dot_each(sources, 10.0)

    honest = overview(doc, 0, run)
    assert len(laid) == 1 and honest[3] == 1             # the estimate chose depth 1 and only it was laid out
    laid.clear()
    monkeypatch.setattr(overview_module, "estimated_px_at_fit", lambda spec: 50.0)   # every depth "legible"
    spec, _, svg, depth = overview(doc, 0, run)
    assert len(laid) == 2 and depth == 1                 # depth 2 laid out, illegible: depth 1 drawn instead
    assert overview_module.legible(svg) and "MulBackward0" not in titles(spec)
