"""Issue 27's picture cost: ``gradviz run`` walks a picture's graph once for the picture file and the page's
overview of it (``graph.folded``), and the overview builds no depth below the graph's deepest module."""

import pytest

from gradviz.rendering import graph, layout, overview
from gradviz.rendering.dot import to_dot
from gradviz.rendering.layout import run_dot
from tests.call_counting import counting
from tests.synthetic_docs import four_blocks_doc, hostile_doc, residual_doc

needs_dot = pytest.mark.skipif(not layout.dot_available(), reason="Graphviz dot is not installed")


@needs_dot
def test_the_run_walks_its_picture_graph_once_for_the_file_and_the_overview(tmp_path, monkeypatch):
    from gradviz.cli.artifacts import write_all

    doc = four_blocks_doc()
    walks = counting(monkeypatch, graph, "working_graph")
    walks_of_overview = counting(monkeypatch, overview, "working_graph")
    drawn = counting(monkeypatch, overview, "build_graph")
    write_all(doc, str(tmp_path), fmt="svg")
    assert drawn, "the page drew no overview: this test no longer covers the reuse"
    of_the_run_doc = [args for args, _ in walks + walks_of_overview if args[0] is doc]
    assert len(of_the_run_doc) == 1 and of_the_run_doc[0][2] == [0] and of_the_run_doc[0][4] is False


@needs_dot
def test_the_overview_from_a_given_walk_is_the_overview_from_its_own():
    doc = four_blocks_doc()
    run = lambda sources: [run_dot(source, "svg", 10).decode("utf-8") for source in sources]  # noqa: E731
    own = overview.overview(doc, 0, run)
    base = graph.working_graph(doc, None, [0], False, False)
    given = overview.overview(doc, 0, run, base=base)
    assert (to_dot(given[0]), given[3]) == (to_dot(own[0]), own[3])
    assert [item.calls for item in base[3].items.values()] == \
        [item.calls for item in graph.working_graph(doc, None, [0], False, False)[3].items.values()]  # unchanged


def test_the_overview_builds_no_depth_below_the_deepest_module(monkeypatch):
    doc = four_blocks_doc()  # modules two deep (net, net.blockN): depths 0, 1 and 2 differ; 3 would be 2 again
    builds = counting(monkeypatch, overview, "build_graph")
    overview.overview(doc, 0, lambda sources: [run_dot(s, "svg", 10).decode("utf-8") for s in sources]
                      if layout.dot_available() else ['<svg width="1000pt" height="1000pt"></svg>'] * len(sources))
    depths = [kwargs["depth"] for _, kwargs in builds]
    assert depths == [0, 1, 2]


@pytest.mark.parametrize("make", [four_blocks_doc, lambda: residual_doc(3), hostile_doc])
def test_collapsing_into_a_copy_leaves_the_walk_and_gives_the_in_place_result(make):
    """``collapse_depth`` with ``copy`` (the overview's depths: the items boxed are read, not copied) against
    ``collapse_depth`` in place on a whole copy, at every depth, architecture boxes too."""
    from gradviz.rendering import collapse
    from gradviz.rendering.style import shape_text

    doc = make()
    index, _, _, walk = graph.working_graph(doc, fold_loops=False)
    before = _state(walk)
    for depth in range(collapse.module_depth(walk) + 2):
        for modules in (False, True):
            whole = walk.copy()
            collapse.collapse_depth(whole, depth, index.modules, shape_text, modules=modules)
            cheap = collapse.collapse_depth(walk, depth, index.modules, shape_text, modules=modules, copy=True)
            assert _state(cheap) == _state(whole), (depth, modules)
            assert _state(walk) == before
    assert any(item.kind == "module" for item in cheap.items.values())  # (the documents have modules to box)


def _state(ir):
    return ([(key, vars(item)) for key, item in ir.items.items()], [vars(edge) for edge in ir.edges], ir.notes,
            ir.clusters, ir.unfolded_size, ir.graph_ids)
