"""The summary's parameters line on real PyTorch: "parameters that no op used" counts only parameters still alive
at the end or given to an optimizer; a layer replaced, the template layer ``nn.TransformerEncoder`` copies and a
model reloaded and evaluated are not counted (pytorch/examples word_language_model counted 169)."""

import io
import os
from functools import partial

import pytest
from rich.console import Console

torch = pytest.importorskip("torch")

import gradviz  # noqa: E402
from gradviz.rendering.report import display_path, idle_parameters, summary  # noqa: E402

from .marked_lines import marked_line  # noqa: E402

pytestmark = pytest.mark.oracle
HERE = os.path.abspath(__file__)
_line_of = partial(marked_line, HERE)  # a line of this file, by its marker comment


def _parameters_row(doc):
    console = Console(width=400, record=True, color_system=None)
    console.print(summary(doc))
    return next(line.strip() for line in console.export_text().splitlines() if line.startswith("parameters"))


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0)
        self.enc = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.fc = torch.nn.Linear(8, 3)

    def forward(self, x):
        return self.fc(self.enc(x))


def _train(model, x, steps=2):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()
    return opt


def test_a_replaced_layer_and_the_copied_template_are_not_counted():
    torch.manual_seed(0)
    x = torch.randn(5, 2, 8)
    with gradviz.trace(engine="torch") as tr:
        model = Net()
        model.fc = torch.nn.Linear(8, 4)  # replaces the first fc, never called
        opt = _train(model, x)
    doc = tr.to_dict()
    live = len(list(model.parameters()))
    assert _parameters_row(doc) == f"parameters      {live}, all got a gradient"
    assert idle_parameters(doc) == []
    # both were seen: 12 template parameters and the first fc's 2, made and gone
    gone = [v for v in doc["variables"] if v.get("is_parameter") and v.get("requires_grad_final") is None]
    assert len(gone) == 14
    del opt


def test_a_model_reloaded_and_evaluated_without_grad_is_not_counted():
    torch.manual_seed(0)
    x = torch.randn(5, 2, 8)
    with gradviz.trace(engine="torch") as tr:
        model = Net()
        _train(model, x)
        saved = io.BytesIO()
        torch.save(model, saved)
        saved.seek(0)
        model = torch.load(saved, weights_only=False)  # reloaded
        model.eval()
        with torch.no_grad():
            model(x)
    doc = tr.to_dict()
    live = len(list(model.parameters()))
    assert _parameters_row(doc) == f"parameters      {live}, all got a gradient"
    reloaded = [v for v in doc["variables"] if v.get("is_parameter")
                and (v.get("location") or {}).get("line") == _line_of("# reloaded")]
    assert len(reloaded) == live


def test_a_module_built_and_never_called_still_alive_is_counted_at_its_line():
    torch.manual_seed(0)
    x = torch.randn(5, 2, 8)
    with gradviz.trace(engine="torch") as tr:
        model = Net()
        spare = torch.nn.Linear(8, 8)  # built, kept, never called
        _train(model, x)
    doc = tr.to_dict()
    live = len(list(model.parameters()))
    assert _parameters_row(doc) == (
        f"parameters      {live}, all got a gradient (and 2 parameters that no op used and no optimizer was "
        f"given, the first made at {display_path(HERE)}:{_line_of('# built, kept, never called')})")
    assert spare.weight.grad is None
