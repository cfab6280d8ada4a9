"""A module box counts the parameters its ops read, wherever they are drawn: a weight tied to another module's
(GPT-2's lm_head reads wte's) belongs to both, and a cell called at every step of a loop holds its weights
although they sit in none of its calls' boxes (the overview's fold said "0 parameters")."""

import re

import pytest

from gradviz.rendering import build_graph, layout

needs_dot = pytest.mark.skipif(not layout.dot_available(), reason="Graphviz dot is not installed")
torch = pytest.importorskip("torch")


def tied_doc():
    """An embedding, a linear body and a head whose weight is the embedding's (tied, as GPT-2's lm_head)."""
    from torch import nn

    import gradviz

    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.body = nn.Embedding(10, 8), nn.Linear(8, 8)
            self.head = nn.Linear(8, 10, bias=False)
            self.head.weight = self.emb.weight

        def forward(self, x):
            return self.head(torch.relu(self.body(self.emb(x))))

    torch.manual_seed(0)
    model, x = Tied(), torch.randint(0, 10, (4, 5))
    with gradviz.trace(engine="torch") as tr:
        nn.functional.cross_entropy(model(x).reshape(-1, 10), x.reshape(-1)).backward()
    return tr.to_dict()


def box_rows(spec):
    return {node.rows[0].text: node.rows[1].text for node in spec.nodes if node.kind == "module"}


def test_a_tied_weight_is_counted_in_each_module_that_reads_it_and_once_in_the_model():
    doc = tied_doc()
    assert box_rows(build_graph(doc, depth=1)) == {
        "model.emb (Embedding)": "1 ops · 1 parameters (80 values)",
        "model.body (Linear)": "4 ops · 2 parameters (72 values)",
        "model.head (Linear)": "4 ops · 1 parameters (80 values)",   # the embedding's weight: said 0 before
    }
    assert box_rows(build_graph(doc, depth=0)) == {"model (Tied)": "10 ops · 3 parameters (152 values)"}


@needs_dot
def test_an_unrolled_cells_fold_and_its_calls_count_the_cells_weights():
    from gradviz.rendering.views import page_views
    from tests.test_render_one_layout import svg_of
    from tests.viewer_models import unrolled_lstm_lm_doc

    views, _ = page_views(unrolled_lstm_lm_doc(steps=6))
    # (from a top view's SVG text, a part view's graph data: the page lays that out)
    rows = {v.key: sorted({a or b for a, b in re.findall(r'>([^<>]* parameters[^<>]*)<|\["([^"]* parameters[^"]*)",\d',
                                                         svg_of(v))}) for v in views}
    # the overview: the embedding, the two cells' fold (each cell: input and state Linear, weight and bias),
    # the decoder; no "reads 8 more" beside a count that already holds them
    assert rows["g0"] == ["1 ops · 1 parameters (800 values)", "4 ops · 2 parameters (850 values)",
                          "6 steps · 180 ops · 8 parameters"]
    fold = next(v for v in views if v.parent == "g0" and "× 6" in v.title)
    assert rows[fold.key] == ["15 ops · 4 parameters (2,176 values)"]   # each call of a cell: its 4 weights
