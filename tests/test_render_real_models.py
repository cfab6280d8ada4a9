"""Pictures of real-size models traced on real PyTorch (tests/render_models.py): a residual net laid out without
the diagonal staircase, a connected forward and architecture view, folded loops and leaves that say what they
fold, a depth chosen to fit, left-to-right layout, and names instead of ``v124``."""

import json
import subprocess

import pytest

torch = pytest.importorskip("torch")

from click.testing import CliRunner  # noqa: E402

from gradviz.cli import main  # noqa: E402
from gradviz.rendering import build_graph, to_dot  # noqa: E402
from gradviz.rendering.graph import choose_depth  # noqa: E402
from gradviz.rendering.layout import dot_available  # noqa: E402
from gradviz.rendering.pictures import pictures_to_draw  # noqa: E402
from tests import render_models  # noqa: E402
from tests.synthetic_docs import residual_doc  # noqa: E402

pytestmark = pytest.mark.oracle
needs_dot = pytest.mark.skipif(not dot_available(), reason="Graphviz dot is not installed")


@pytest.fixture(scope="module")
def resnet8():
    return render_models.traced_step(*render_models.resnet((2, 2, 2, 2)))


@pytest.fixture(scope="module")
def transformer():
    return render_models.traced_step(*render_models.transformer(layers=2))


@pytest.fixture(scope="module")
def bert():
    return render_models.traced_step(*render_models.bert(layers=4))


def laid_out_size(spec):
    """(width, height) in points of the picture as ``dot -Tjson`` lays it out."""
    done = subprocess.run(["dot", "-Tjson"], input=to_dot(spec).encode("utf-8"), capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    x0, y0, x1, y1 = (float(v) for v in json.loads(done.stdout)["bb"].split(","))
    return x1 - x0, y1 - y0


def components(spec):
    """Weakly connected components of the drawn picture (every node and edge of the spec)."""
    parent = {n.name: n.name for n in spec.nodes}

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for edge in spec.edges:
        parent[find(edge.tail)] = find(edge.head)
    return len({find(name) for name in parent})


def texts(node):
    return [row.text for row in node.rows]


def roots(spec):
    return [n for n in spec.nodes if "root" in texts(n)]


# -- layout -----------------------------------------------------------------------------------------------------
@needs_dot
def test_resnet_blocks_lay_out_without_the_staircase(resnet8):
    spec = build_graph(resnet8, node_budget=None)        # every op, every block cluster
    assert sum(1 for c in spec.clusters if "(BasicBlock)" in c.rows[0].text) == 8
    width, height = laid_out_size(spec)
    assert width < 2 * height, (width, height)            # the staircase was 11,836 × 5,794 pt
    assert width < 2500                                   # a column, not a diagonal


@needs_dot
def test_48_block_resnet_is_a_column_of_folded_stages():
    doc = render_models.traced_step(*render_models.resnet((12, 12, 12, 12)))
    spec = build_graph(doc, node_budget=None)
    width, height = laid_out_size(spec)
    assert width < 2 * height and width < 2500, (width, height)
    # each stage's 12 blocks are one fold, drawn around the blocks inside its stage (not inside its first block)
    assert _loop_notes(spec) == ["a loop of 12 steps × 7 ops is drawn once"] * 4
    names = {c.name: c.rows[0].text for c in spec.clusters}
    folds = [c for c in spec.clusters if c.rows[0].text == "× 12"]
    assert sorted(names[c.parent] for c in folds) == [f"model.layer{i} (Sequential)" for i in range(1, 5)]
    # collapsed, a box inside a fold is named for every step's module
    boxes = [texts(n)[0] for n in build_graph(doc, depth=2).nodes if n.kind == "module"]
    assert [f"model.layer{i}.# (BasicBlock)" in boxes for i in range(1, 5)] == [True] * 4


@needs_dot
def test_the_staircase_came_from_parameters_a_rank_above_their_op():
    """The cause, kept visible: the same residual graph with each parameter a rank of its own (minlen 1) is
    several times wider; with minlen 0 (what the pictures write) each block stacks under the one before."""
    spec = build_graph(residual_doc(8), fold_loops=False)
    assert {e.minlen for e in spec.edges if e.tail.startswith("n") and e.kind == "data"} == {0, 1}
    fixed = laid_out_size(spec)
    for edge in spec.edges:
        edge.minlen = 1
    staircase = laid_out_size(spec)
    assert fixed[0] < fixed[1] / 2 and staircase[0] > 5 * fixed[0], (fixed, staircase)


@needs_dot
@pytest.mark.parametrize("forward", [False, True])
def test_bert_picture_is_not_mostly_white(bert, forward):
    spec = build_graph(bert, forward=forward)
    width, height = laid_out_size(spec)
    # area per drawn node: about 50,000 pt² now; before, 95,000 (backward, 2,290 × 3,701 pt) and 160,000
    # (forward, 6,217 × 2,275 pt, its disconnected "roots" side by side); the 11,946 × 6,882 pt far more
    assert width * height / len(spec.nodes) < 75_000, (width, height, len(spec.nodes))
    assert width < 2 * height


# -- forward and architecture views -------------------------------------------------------------------------------
def test_forward_view_of_a_real_transformer_is_connected(transformer):
    spec = build_graph(transformer, forward=True, node_budget=None)
    assert components(spec) == 1
    assert [texts(n)[0] for n in roots(spec)] == ["NllLoss"]   # one root: the loss (was 103 "root" boxes)
    ops = {texts(n)[0] for n in spec.nodes if n.kind == "op"}
    assert {"Addmm", "NativeLayerNorm", "LogSoftmax"} <= ops and not any(o.endswith("Backward0") for o in ops)


def test_architecture_view_draws_modules_as_boxes_with_shapes(transformer):
    spec = build_graph(transformer, architecture=True)
    assert spec.title.split(" · ")[1] == "architecture" and spec.rankdir == "TB"
    assert components(spec) == 1 and len(roots(spec)) == 1
    boxes = {texts(n)[0]: texts(n) for n in spec.nodes if n.kind == "module"}
    linear1 = boxes["model.encoder.layers.0.linear1 (Linear)"]
    assert linear1[1:] == ["4 ops · 2 parameters (544 values)", "in (2, 5, 16)", "out (2, 5, 32)"]
    assert boxes["model.head (Linear)"][-2:] == ["in (2, 16)", "out (2, 10)"]
    assert sum(1 for title in boxes if title.endswith("(MultiheadAttention)")) == 2
    # the ops between modules stay ops: the residual adds, the mean, the loss
    ops = [texts(n)[0] for n in spec.nodes if n.kind == "op"]
    assert ops.count("Add") == 4 and "Mean" in ops and "NllLoss" in ops
    assert not any(n.kind == "leaf" for n in spec.nodes)    # parameters are inside their module's box


def test_architecture_view_of_a_resnet(resnet8):
    spec = build_graph(resnet8, architecture=True)
    boxes = [texts(n)[0] for n in spec.nodes if n.kind == "module"]
    assert sum(1 for b in boxes if b.endswith("(Conv2d)")) == 8 * 2 + 1 + 3   # blocks, stem, downsamples
    assert components(spec) == 1


# -- folding ------------------------------------------------------------------------------------------------------
def _repeat_clusters(spec):
    return [c.rows[0].text for c in spec.clusters if c.rows[0].text.startswith("× ")]


def _loop_notes(spec):
    return [note for note in spec.subtitle if note.startswith("a loop of ")]


def test_every_iterations_picture_draws_as_many_folds_as_it_says():
    model, x, y = render_models.transformer(layers=5)
    doc = render_models.traced_step(model, x, y, steps=3)
    drawn = pictures_to_draw(doc)
    assert len(drawn) == 2 and drawn[1].iteration == 2
    for picture in drawn:
        spec = build_graph(doc, graphs=[picture.graph], node_budget=None)
        notes = _loop_notes(spec)
        assert len(notes) == 1 and len(_repeat_clusters(spec)) == len(notes)
        steps = notes[0].split()[3]
        assert _repeat_clusters(spec) == [f"× {steps}"]
        # the fold's cluster is really drawn: its nodes are inside it
        fold = next(c.name for c in spec.clusters if c.rows[0].text.startswith("× "))
        inside = {fold}
        while True:
            more = {c.name for c in spec.clusters if c.parent in inside} - inside
            if not more:
                break
            inside |= more
        assert sum(1 for n in spec.nodes if n.cluster in inside) > 10


def test_a_folded_leaf_lists_every_parameter_it_stands_for(bert):
    spec = build_graph(bert)
    index = {v["id"]: v for v in bert["variables"]}
    folded = [n for n in spec.nodes if len(n.doc_variables) > 1]
    assert folded
    weight = next(n for n in folded if texts(n)[0] == "model.encoder.layers.#.linear1.weight")
    names = [index[v]["name"] for v in weight.doc_variables]
    steps = int(_repeat_clusters(spec)[0].split()[1])
    first = 4 - steps   # the first layer reads the embeddings, not a layer's output: it is not folded
    assert names == [f"model.encoder.layers.{i}.linear1.weight" for i in range(first, 4)]
    assert f"a different one each step ({steps} in all)" in texts(weight)
    assert all(name in weight.tooltip for name in names)
    accumulators = {index[v]["accumulator"] for v in weight.doc_variables}
    assert set(weight.doc_nodes) == accumulators


# -- depth for a budget -------------------------------------------------------------------------------------------
def test_choose_depth_is_the_deepest_that_fits(transformer):
    graph = [transformer["graphs"][0]["id"]]
    # model(0) > encoder(1) > layers.N(2) > self_attn, linear1…(3): 116 ops drawn whole
    assert choose_depth(transformer, graph, 1000) == 4
    assert choose_depth(transformer, graph, 100) == 3
    assert choose_depth(transformer, graph, 10) == 2
    assert choose_depth(transformer, graph, 1) == 0
    spec = build_graph(transformer)                        # no depth given, over the 100-node budget
    assert len(spec.nodes) <= 100
    assert spec.subtitle == ["modules deeper than 3 are collapsed to fit 100 nodes (choose with --depth / depth=)"]
    assert "model.encoder.layers.0.self_attn (MultiheadAttention)" in [texts(n)[0] for n in spec.nodes]
    assert len(build_graph(transformer, depth=4).nodes) > 100   # an explicit depth wins


# -- rankdir ----------------------------------------------------------------------------------------------------
def test_rankdir_option_and_its_error(tmp_path, resnet8):
    assert build_graph(resnet8, rankdir="lr").rankdir == "LR"
    assert "rankdir=LR" in to_dot(build_graph(resnet8, rankdir="LR"))
    with pytest.raises(ValueError, match="^unknown rankdir `XY`: use one of TB, LR, BT, RL$"):
        build_graph(resnet8, rankdir="XY")
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps(resnet8))
    runner = CliRunner()
    done = runner.invoke(main, ["graph", str(trace), "--rankdir", "lr", "-o", str(tmp_path / "g.dot")])
    assert done.exit_code == 0, done.output
    assert "\trankdir=LR" in (tmp_path / "g.dot").read_text().split("\n")[1].replace("graph [", "\t")
    bad = runner.invoke(main, ["graph", str(trace), "--rankdir", "sideways", "-o", str(tmp_path / "h.dot")])
    assert bad.exit_code == 2 and "Traceback" not in bad.output
    assert "unknown rankdir `sideways`: use one of TB, LR, BT, RL" in bad.output
    assert not (tmp_path / "h.dot").exists()


# -- names --------------------------------------------------------------------------------------------------------
def test_saved_tensors_are_named_by_what_made_them(transformer):
    spec = build_graph(transformer, show_saved=True, node_budget=None)
    saved = [texts(n)[0] for n in spec.nodes if n.kind == "saved"]
    assert saved and not any(text.split()[-1].startswith("v") and text.split()[-1][1:].isdigit() for text in saved)
    # an intermediate is named by the op and module that made it, a parameter by its module path
    assert {"saved input Relu of model.encoder.layers.0", "saved input NativeLayerNorm of model.encoder.layers.0.norm1",
            "saved input model.encoder.layers.0.linear1.weight", "saved input target"} <= set(saved)


def _trace_source(tmp_path, source):
    import gradviz

    path = tmp_path / "script.py"
    path.write_text(source)
    with gradviz.trace(engine="torch") as tr:
        exec(compile(source, str(path), "exec"), {"__name__": "__main__", "__file__": str(path)})
    return tr.to_dict()


def test_two_linear_layers_have_two_names(tmp_path):
    doc = _trace_source(tmp_path, "\n".join([
        "import torch, torch.nn as nn",
        "layers = [nn.Linear(4, 4), nn.Linear(4, 2)]",
        "h = torch.randn(3, 4)",
        "for layer in layers:",
        "    h = torch.tanh(layer(h))",
        "out = nn.Linear(2, 1)(h)",
        "out = nn.Linear(1, 1)(out)",
        "net = nn.Linear(1, 1)",
        "bundle = (net, out)   # a tuple of arguments, not a stack of layers: net keeps its own name",
        "out = bundle[0](bundle[1])",
        "out.sum().backward()",
    ]))
    names = [v["name"] for v in doc["variables"] if v.get("is_parameter")]
    assert names == ["layers[0].weight", "layers[0].bias", "layers[1].weight", "layers[1].bias",
                     "Linear.weight", "Linear.bias", "Linear_2.weight", "Linear_2.bias", "net.weight", "net.bias"]
    leaves = [texts(n)[0] for n in build_graph(doc).nodes if n.kind == "leaf"]
    assert sorted(leaves) == sorted(names)


def test_gradviz_run_passes_rankdir_to_its_pictures(tmp_path):
    import sys

    script = tmp_path / "chain.py"
    script.write_text("import torch\nw = torch.ones(3, requires_grad=True)\n(w * 2).sum().backward()\n")
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "gradviz", "run", "--engine", "gradviz", "--format", "dot",
                           "--rankdir", "LR", "--out", str(out), "-q", str(script)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    (picture,) = out.glob("*.dot")
    assert "\trankdir=LR," in picture.read_text().replace("graph [", "\t")
    bad = subprocess.run([sys.executable, "-m", "gradviz", "run", "--rankdir", "up", str(script)],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1, bad.stderr
    assert "unknown rankdir `up`: use one of TB, LR, BT, RL" in bad.stderr
