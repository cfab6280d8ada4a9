"""``gradviz.integrations.lightning.GradvizCallback`` on real Lightning fits: a planted ``.grad`` read of a
non-leaf in ``training_step`` is reported at its line, in report.json/report.html, through Lightning's logger
and the trainer's loggers, and fails or warns per ``fail_on``; a clean fit stays silent; ``steps`` chooses which
steps are traced. The planted read happens on every step, the first included, and the fits that must see it
pass ``light=False`` so that no light-mode sampling question enters the test."""

import json
import logging
import os
import warnings
from functools import partial

import pytest

torch = pytest.importorskip("torch")
L = pytest.importorskip("lightning")

from lightning.pytorch.loggers import Logger  # noqa: E402

from gradviz.integrations.lightning import DiagnosticsFound, GradvizCallback, GradvizWarning  # noqa: E402

from .marked_lines import marked_line  # noqa: E402

pytestmark = pytest.mark.oracle
_line_of = partial(marked_line, os.path.abspath(__file__))


class TwoLayers(L.LightningModule):
    """Manual optimization: the training step runs its own backward, then reads a gradient."""

    def __init__(self, planted):
        super().__init__()
        self.automatic_optimization = False
        self.layer1, self.layer2 = torch.nn.Linear(4, 8), torch.nn.Linear(8, 1)
        self.planted = planted
        self.grad_seen = []

    def training_step(self, batch, batch_idx):
        x, y = batch
        opt = self.optimizers()
        opt.zero_grad()
        hidden = torch.relu(self.layer1(x))
        loss = torch.nn.functional.mse_loss(self.layer2(hidden), y)
        self.manual_backward(loss)
        if self.planted:
            self.grad_seen.append(hidden.grad)  # planted: a non-leaf's .grad, None
        opt.step()
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


class Recorded(Logger):
    """A trainer logger that keeps what it is given."""

    def __init__(self):
        super().__init__()
        self.metrics = []

    name, version = "recorded", 0

    def log_metrics(self, metrics, step=None):
        self.metrics.append((dict(metrics), step))

    def log_hyperparams(self, *args, **kwargs):
        pass


@pytest.fixture
def lightning_log():
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append((record.levelname, record.getMessage()))

    logger = logging.getLogger("lightning.pytorch.callbacks.gradviz")
    handler = Keep(level=logging.DEBUG)
    logger.addHandler(handler)
    old = logger.level
    logger.setLevel(logging.DEBUG)
    yield records
    logger.removeHandler(handler)
    logger.setLevel(old)


def fit(tmp_path, callback, planted, steps=4, logger=False):
    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
    model = TwoLayers(planted)
    trainer = L.Trainer(max_steps=steps, accelerator="cpu", devices=1, logger=logger, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, default_root_dir=str(tmp_path),
                        callbacks=[callback])
    trainer.fit(model, torch.utils.data.DataLoader(data, batch_size=8))
    return model


def test_a_planted_none_grad_fails_the_fit_at_its_line(tmp_path, lightning_log):
    callback = GradvizCallback(fail_on="warning", light=False, pictures=False)
    with pytest.raises(DiagnosticsFound) as raised:
        fit(tmp_path, callback, planted=True)
    line = _line_of("# planted: a non-leaf's .grad")
    assert [(d["code"], d["location"]["line"]) for d in raised.value.diagnostics] == [("none-grad", line)]
    assert f"none-grad (warning) at {os.path.abspath(__file__)}:{line}" in str(raised.value)
    folder = tmp_path / "gradviz"  # <default_root_dir>/gradviz
    assert raised.value.report_dir == str(folder)
    doc = json.loads((folder / "report.json").read_text())
    assert [(d["code"], d["location"]["line"]) for d in doc["diagnostics"]] == [("none-grad", line)]
    assert len(doc["backwards"]) == 4  # the whole fit: four steps
    assert "none-grad" in (folder / "report.html").read_text()
    warned = [m for level, m in lightning_log if level == "WARNING"]
    assert len(warned) == 1 and warned[0].startswith(f"gradviz: none-grad (warning) at {os.path.abspath(__file__)}:"
                                                     f"{line}: `hidden.grad` is None")


def test_below_fail_on_the_fit_ends_with_a_warning_and_the_counts_are_logged(tmp_path, lightning_log):
    callback = GradvizCallback(fail_on="error", light=False, pictures=False)
    recorded = Recorded()
    with pytest.warns(GradvizWarning, match="1 diagnostic, none at or above fail_on='error' .first: none-grad"):
        model = fit(tmp_path, callback, planted=True, logger=recorded)
    assert model.grad_seen == [None] * 4  # the fit ran to its end
    assert (recorded.metrics[-1][0], recorded.metrics[-1][1]) == (
        {"gradviz/errors": 0, "gradviz/warnings": 1, "gradviz/infos": 0}, 4)
    assert callback.document["diagnostics"][0]["code"] == "none-grad"


def test_a_clean_fit_stays_silent(tmp_path, lightning_log):
    callback = GradvizCallback(fail_on="warning", pictures=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", GradvizWarning)
        fit(tmp_path, callback, planted=False)
    doc = json.loads((tmp_path / "gradviz" / "report.json").read_text())
    assert doc["diagnostics"] == [] and doc["backwards"]  # the default (light) schedule saw the steps
    assert [level for level, _ in lightning_log] == ["INFO"]
    assert lightning_log[0][1] == f"gradviz: no diagnostics; report in {tmp_path / 'gradviz' / 'report.html'}"


def test_chosen_steps_are_the_only_ones_traced(tmp_path):
    callback = GradvizCallback(out_dir=str(tmp_path / "steps"), steps=(1, 2), light=False, fail_on="never",
                               pictures=True)
    fit(tmp_path, callback, planted=True, steps=5)
    doc = callback.document
    assert len(doc["backwards"]) == 2  # steps 1 and 2 of 0..4
    assert [d["code"] for d in doc["diagnostics"]] == ["none-grad"]
    files = sorted(os.listdir(tmp_path / "steps"))
    assert "report.json" in files and "report.html" in files
    assert any(name.startswith("structure-") and name.endswith(".svg") for name in files)  # as gradviz run draws


def test_a_fit_that_raises_still_writes_its_report(tmp_path):
    class Broken(TwoLayers):
        def training_step(self, batch, batch_idx):
            if self.global_step == 2:
                raise ValueError("bad batch")  # the fit's own error
            return super().training_step(batch, batch_idx)

    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
    trainer = L.Trainer(max_steps=4, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, default_root_dir=str(tmp_path),
                        callbacks=[GradvizCallback(light=False, pictures=False)])
    with pytest.raises(ValueError, match="bad batch"):
        trainer.fit(Broken(planted=False), torch.utils.data.DataLoader(data, batch_size=8))
    doc = json.loads((tmp_path / "gradviz" / "report.json").read_text())
    assert len(doc["backwards"]) == 2
    assert doc["status"]["exception"]["type"] == "ValueError"


@pytest.mark.parametrize("kwargs, error", [
    ({"steps": 0}, "steps must be at least 1 (the first N steps), got 0"),
    ({"steps": (3, 1)}, "steps=(first, last) needs 0 <= first <= last, got (3, 1)"),
    ({"fail_on": "errors"}, "fail_on must be one of error, warning, never, got 'errors'"),
])
def test_bad_arguments_are_one_line(kwargs, error):
    with pytest.raises(ValueError) as raised:
        GradvizCallback(**kwargs)
    assert str(raised.value) == error
