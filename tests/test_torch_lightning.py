"""PyTorch Lightning's automatic optimization runs ``training_step`` and backward inside ``optimizer.step(closure)``:
traced like a plain loop, with a mistake planted in ``training_step`` named at its line. Lightning is slow to
import: one fit, shared by the tests."""

import os
from functools import partial

import pytest

torch = pytest.importorskip("torch")
L = pytest.importorskip("lightning")

import gradviz  # noqa: E402

from .marked_lines import marked_line  # noqa: E402

pytestmark = pytest.mark.oracle
HERE = os.path.abspath(__file__)
_line_of = partial(marked_line, HERE)  # a line of this file, by its marker comment


class Regression(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)
        self.total_loss = 0

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.layer(x), y)  # the forward in training_step
        self.total_loss += loss  # planted: keeps every step's graph
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


@pytest.fixture(scope="module")
def fit():
    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
    model = Regression()
    trainer = L.Trainer(max_steps=3, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)
    with gradviz.trace(engine="torch") as tr:
        trainer.fit(model, torch.utils.data.DataLoader(data, batch_size=8))
    return tr.to_dict(), model


def test_lightning_steps_show_their_graphs_backward_calls_and_gradients(fit):
    doc, model = fit
    assert doc["internal_errors"] == []
    assert sum(s["count"] for s in doc["structures"]) == 3
    assert len(doc["backwards"]) == 3
    forward = _line_of("# the forward in training_step")
    assert {n["location"]["line"] for n in doc["nodes"] if n["op"].startswith("Mse")} == {forward}
    steps = [e for e in doc["events"] if e["kind"] == "optimizer" and e["event"] == "step"]
    assert [(e["optimizer"], e["iteration"]) for e in steps] == [("SGD", 0), ("SGD", 1), ("SGD", 2)]
    params = [v for v in doc["variables"] if v.get("is_parameter")]
    assert len(params) == 2
    for backward in doc["backwards"]:  # each step's backward reached both parameters
        assert set(backward["leaf_grad_norms"]) == {str(v["id"]) for v in params}
    assert model.layer.weight.grad is not None


def test_the_total_loss_planted_in_training_step_is_named_at_its_line(fit):
    doc, _ = fit
    assert [(d["code"], d["location"]["line"]) for d in doc["diagnostics"]] == [
        ("retained-graph", _line_of("# planted: keeps every step's graph"))]
