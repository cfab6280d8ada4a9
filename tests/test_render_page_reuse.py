"""Issue 27's picture cost: ``gradviz run`` writes report.html twice (before its pictures and with them); the
second write reuses the trace-only pieces of the first (``html_parts``'s ``reuse``) and the page is the same text
as one built from scratch. A picture's depth is chosen from one reading of each item's module keys
(``collapse.depth_for_budget``), with the same answer as trying ``size_at_depth`` at each depth."""

import pytest

from gradviz.rendering import collapse, graph, html, layout
from gradviz.rendering.html import html_parts, html_report
from tests.call_counting import counting
from tests.synthetic_docs import four_blocks_doc, hostile_doc, residual_doc

needs_dot = pytest.mark.skipif(not layout.dot_available(), reason="Graphviz dot is not installed")


@needs_dot
def test_a_run_builds_the_pages_trace_only_parts_once_for_its_two_writes(tmp_path, monkeypatch):
    from gradviz.cli.artifacts import write_all

    doc = four_blocks_doc()
    searched = counting(monkeypatch, html, "_search_index")
    tables = counting(monkeypatch, html, "_parameter_table")
    pages = counting(monkeypatch, html, "report_data")
    write_all(doc, str(tmp_path), fmt="svg")
    assert len(pages) == 2, "the page was not written twice: this test no longer covers the reuse"
    assert (len(searched), len(tables)) == (1, 1)
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert page.count('"search":') == 1 and 'id="pictures-pending"' not in page


@pytest.mark.parametrize("make", [four_blocks_doc, hostile_doc, lambda: residual_doc(3)])
def test_a_page_written_again_with_reused_parts_is_the_page_built_whole(make):
    doc = make()
    pictures = {"one": '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 10 10"><g id="gv-n1"></g></svg>'}
    reuse = {}
    first = "".join(html_parts(doc, {}, pending=True, reuse=reuse))
    assert "trace" in reuse and first == html_report(doc, {}, pending=True)
    again = "".join(html_parts(doc, pictures, reuse=reuse))
    assert again == html_report(doc, pictures)
    assert again != first  # (the pictures changed the page: the comparison is not of two empty pages)


def _depth_tried_each(ir, node_budget):
    for depth in range(collapse.module_depth(ir), -1, -1):
        if collapse.size_at_depth(ir, depth) <= node_budget:
            return depth
    return 0


@pytest.mark.parametrize("make", [four_blocks_doc, lambda: residual_doc(3), hostile_doc])
@pytest.mark.parametrize("fold_loops", [True, False])
def test_the_depth_for_a_budget_is_the_deepest_that_fits(make, fold_loops):
    ir = graph.working_graph(make(), fold_loops=fold_loops)[3]
    collapse.ghost_leaves(ir, 2)  # (ghosts count for no node)
    answers = {budget: collapse.depth_for_budget(ir, budget) for budget in range(ir.size() + 2)}
    assert answers == {budget: _depth_tried_each(ir, budget) for budget in answers}
    if collapse.module_depth(ir):
        assert len(set(answers.values())) > 1, "every budget gave one depth: the comparison says little"
