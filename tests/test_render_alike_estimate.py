"""Two cheap stand-ins for ``dot``: views drawn alike but for their digits share one layout
(gradviz/rendering/alike.py), and the overview's size at fit is estimated without a layout (estimate.py)."""

import re

import pytest

from gradviz.rendering.alike import key, translated, words
from gradviz.rendering.dot import to_dot
from gradviz.rendering.estimate import drawn_size
from gradviz.rendering.graph import build_graph
from gradviz.rendering.layout import dot_available, run_dot
from gradviz.rendering.overview import compact, pinned_nodes
from tests.synthetic_docs import DocBuilder
from tests.test_overview_folding import stack_doc

needs_dot = pytest.mark.skipif(not dot_available(), reason="Graphviz dot is not installed")
_SIZE = re.compile(r'<svg width="([\d.]+)pt" height="([\d.]+)pt"')


def two_blocks_doc(widths=(256, 512)):
    """``net.block3`` and ``net.block4`` reading one op outside them: the same ops, shapes (64, 256) and
    (64, 512), parameters of their own."""
    b = DocBuilder("blocks.py")
    b.module("net", "Net")
    x = b.op("ViewBackward0", [b.leaf("x", (64, 128))], (64, 128))  # both blocks read this op outside them
    outs = []
    for block, width in zip((3, 4), widths):
        path = f"net.block{block}"
        b.module(path, "Block")
        y = b.op("MmBackward0", [x, b.leaf(f"{path}.weight", (width, width), parameter=True)], (64, width),
                 module=["net", path])
        outs.append(b.op("ReluBackward0", [y], (64, width), module=["net", path]))
    b.backward(b.op("SumBackward0", [b.op("CatBackward0", outs, (64, sum(widths)))], ()))
    return b.finish()


def block_source(doc, block):
    nodes = [n["id"] for n in doc["nodes"] if f"net.block{block}" in n["module"]]
    graphs = [dict(g, nodes=[n for n in g["nodes"] if n in nodes]) for g in doc["graphs"]]
    return to_dot(build_graph(dict(doc, graphs=graphs), graphs=[0]))


def test_a_word_standing_for_two_words_is_not_translated():
    assert words("(8, 2) layers.2 (2, 2)", "(8, 2) layers.3 (2, 3)") is None  # "2" would be both 2 and 3
    assert words("layers.2 (8, 2) n12", "layers.3 (8, 2) n14") == {"layers.2": "layers.3", "8": "8", "2": "2",
                                                                   "n12": "n14"}
    assert translated("<svg/>", "layers.2 (8, 2)", "layers.3 (8, 2)") is not None
    assert translated("<svg/>", "a 2 2", "a 2 3") is None


@needs_dot
@pytest.mark.parametrize("widths", [(256, 512), (256, 256)])  # a number changes (word by word), or only names
def test_the_second_of_two_alike_blocks_is_its_own_picture_without_a_layout_of_its_own(widths):
    doc = two_blocks_doc(widths)
    first, second = block_source(doc, 3), block_source(doc, 4)
    assert first != second and key(first) == key(second)
    laid = run_dot(first, "svg", 10.0).decode("utf-8")
    made = translated(laid, first, second)
    assert made == run_dot(second, "svg", 10.0).decode("utf-8")   # byte for byte what dot draws of it
    ids = {n["id"] for n in doc["nodes"] if "net.block4" in n["module"]}
    assert {int(i) for i in re.findall(r'id="gv&#45;n(\d+)"', made)} == ids
    assert ">net.block4.weight</text>" in made and "block3" not in made and f"(64, {widths[1]})" in made
    assert re.findall(r'points="[^"]*"', made) == re.findall(r'points="[^"]*"', laid)  # coordinates untouched


@needs_dot
@pytest.mark.parametrize("depth", [0, 1, 2])
def test_the_estimate_is_within_a_tenth_of_dots_size_where_it_limits_the_fit(depth):
    doc, _ = stack_doc(blocks=6, ops=4, diagnosed_block=2)
    accumulators = {n["id"] for n in doc["nodes"] if n["op"] == "AccumulateGrad"}
    spec = compact(build_graph(doc, graphs=[0], depth=depth, fold_loops=False), depth, accumulators,
                   pinned_nodes(doc, 0))
    for rankdir in ("BT", "LR"):
        spec.rankdir = rankdir
        width, height = map(float, _SIZE.search(run_dot(to_dot(spec), "svg", 10.0).decode("utf-8")).groups())
        guess_width, guess_height = drawn_size(spec)
        along = (height, guess_height) if rankdir == "BT" else (width, guess_width)  # the length that grows
        assert abs(along[1] - along[0]) <= 0.1 * along[0], (rankdir, (width, height), (guess_width, guess_height))
        if rankdir == "BT":
            assert abs(guess_width - width) <= 0.15 * width
