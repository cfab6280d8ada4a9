"""The issue's size criterion on a real-PyTorch ResNet (8 basic blocks), for both layout directions: top to
bottom, the picture is no wider than twice its height; left to right, it is the same column laid on its side
(no taller than twice its width), not a second staircase."""

import pytest

pytest.importorskip("torch")

from gradviz.rendering import build_graph  # noqa: E402
from gradviz.rendering.layout import dot_available  # noqa: E402
from tests import render_models  # noqa: E402
from tests.test_render_real_models import laid_out_size  # noqa: E402

pytestmark = [pytest.mark.oracle, pytest.mark.skipif(not dot_available(), reason="Graphviz dot is not installed")]


@pytest.fixture(scope="module")
def resnet8():
    return render_models.traced_step(*render_models.resnet((2, 2, 2, 2)))


@pytest.mark.parametrize("options", [{}, {"node_budget": None}, {"architecture": True}])
def test_resnet_top_to_bottom_and_left_to_right(resnet8, options):
    tb = build_graph(resnet8, rankdir="TB", **options)
    lr = build_graph(resnet8, rankdir="LR", **options)
    assert (tb.rankdir, lr.rankdir) == ("TB", "LR") and len(tb.nodes) == len(lr.nodes)
    (tb_w, tb_h), (lr_w, lr_h) = laid_out_size(tb), laid_out_size(lr)
    assert tb_w < 2 * tb_h and tb_w < 2500, (tb_w, tb_h)     # a column (the staircase was 11,828 × 5,786 pt)
    assert lr_h < 2 * lr_w and lr_h < 2500, (lr_w, lr_h)     # a row: the column on its side
    # the row is about as long as the column is tall (it is the same ranks), not wider from a diagonal
    assert 0.5 < lr_w / tb_h < 4, (lr_w, tb_h)
