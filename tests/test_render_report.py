"""Rich renderables for the terminal report: built, not printed; checked by rendering them to text."""

from rich.console import Console

from gradviz.rendering.report import diagnostics_table, memory_table, sparkline, summary
from gradviz.rendering.synthetic import DocBuilder, chained_models_doc


def text_of(renderable):
    console = Console(width=140, record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


def test_summary_lists_graphs_structures_and_parameter_gradients():
    doc = chained_models_doc()
    doc["backwards"][0]["leaf_grad_norms"].pop("3")        # pretend model2.weight (v3) got no gradient
    out = text_of(summary(doc))
    assert "graphs          1 (1 distinct structure)" in out
    assert "structure 0: 9 nodes, seen 1× (iteration 0)" in out
    assert "backward calls  1" in out
    lines = {line.split()[0]: line.split()[-1] for line in out.splitlines() if line.startswith("model")}
    assert lines == {"model1.weight": "yes", "model1.bias": "yes", "model2.weight": "none", "model2.bias": "yes"}


def test_diagnostics_table_shows_location_source_line_and_hint():
    out = text_of(diagnostics_table(chained_models_doc()))
    assert "warning" in out and "none-grad" in out and "model.py:12" in out
    assert "y1.backward(y1.grad)" in out and "hint: call y1.retain_grad() before backward" in out
    assert text_of(diagnostics_table(DocBuilder().finish())).strip() == \
        "No diagnostics: nothing suspicious was found."


def test_memory_table_with_growing_sparkline():
    b = DocBuilder()
    for _ in range(4):
        w = b.leaf("w", [250], parameter=True)
        b.backward(b.op("SumBackward", [b.op("ExpBackward", [w], [250], saved=[w])], []), retain_graph=True)
        b.next_iteration()
    out = text_of(memory_table(b.finish()))
    assert "peak retained   4.0 kB" in out and "final retained  4.0 kB" in out
    assert "▃▅▆██" in out and "iterations 0–4: 1.0 kB → 4.0 kB (growing)" in out
    assert sparkline([0, 0]) == "▁▁" and sparkline([1, 2, 4]) == "▃▅█"
