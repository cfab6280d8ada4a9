"""A cheap stand-in for ``dot``: the overview's size at fit is estimated without a layout (estimate.py). (The
views below the top ones are laid out by the page itself now, so alike.py's shared layouts went with them.)"""

import re

import pytest

from gradviz.rendering.dot import to_dot
from gradviz.rendering.estimate import drawn_size
from gradviz.rendering.graph import build_graph
from gradviz.rendering.layout import dot_available, run_dot
from gradviz.rendering.overview import compact, pinned_nodes
from tests.test_overview_folding import stack_doc

needs_dot = pytest.mark.skipif(not dot_available(), reason="Graphviz dot is not installed")
_SIZE = re.compile(r'<svg width="([\d.]+)pt" height="([\d.]+)pt"')


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
