"""``gradviz.integrations.transformers.GradvizCallback`` on real Hugging Face ``Trainer.train()`` runs of a tiny
GPT-2 built from a config (nothing downloaded: HF_HUB_OFFLINE=1). A ``running_loss += loss`` planted in
``compute_loss`` (a graph kept alive every step, from the first; six steps, so that the graphs alive make a trend)
is reported at its line, in report.json, through
transformers' logger and ``state.log_history``, and fails or warns per ``fail_on``; a clean run stays silent;
``steps`` chooses which steps are traced. The fits that must see the planted line pass ``light=False``."""

import json
import logging
import os
import warnings
from functools import partial

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers is imported: a test must never reach for the hub
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")

from gradviz.integrations.transformers import DiagnosticsFound, GradvizCallback, GradvizWarning  # noqa: E402

from .marked_lines import marked_line  # noqa: E402

pytestmark = pytest.mark.oracle
_line_of = partial(marked_line, os.path.abspath(__file__))


class KeepsLosses(transformers.Trainer):
    running_loss = 0

    def compute_loss(self, model, inputs, return_outputs=False, **kwargs):
        loss = super().compute_loss(model, inputs, return_outputs=return_outputs, **kwargs)
        self.running_loss += loss  # planted: keeps every step's graph alive
        return loss


def tiny_gpt2():
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=64, n_positions=16, n_embd=16, n_layer=1, n_head=2)
    return transformers.GPT2LMHeadModel(config)


def dataset(n=16, length=8):
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 64, (n, length), generator=generator)
    return [{"input_ids": row, "labels": row} for row in ids]


def train(tmp_path, callback, trainer_class=transformers.Trainer, steps=3):
    args = transformers.TrainingArguments(output_dir=str(tmp_path / "run"), max_steps=steps,
                                          per_device_train_batch_size=4, learning_rate=1e-3, report_to=[],
                                          save_strategy="no", logging_strategy="no", disable_tqdm=True,
                                          use_cpu=True, seed=0)
    trainer = trainer_class(model=tiny_gpt2(), args=args, train_dataset=dataset(), callbacks=[callback])
    trainer.train()
    return trainer


@pytest.fixture
def hf_log():
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append((record.levelname, record.getMessage()))

    logger = logging.getLogger("transformers.integrations.gradviz")
    handler = Keep(level=logging.DEBUG)
    logger.addHandler(handler)
    old = logger.level
    logger.setLevel(logging.DEBUG)
    yield records
    logger.removeHandler(handler)
    logger.setLevel(old)


def test_a_planted_running_loss_fails_training_at_its_line(tmp_path, hf_log):
    callback = GradvizCallback(fail_on="warning", light=False, pictures=False)
    with pytest.raises(DiagnosticsFound) as raised:
        train(tmp_path, callback, KeepsLosses, steps=6)
    line = _line_of("# planted: keeps every step's graph")
    found = [(d["code"], d["location"]["file"], d["location"]["line"]) for d in raised.value.diagnostics]
    assert found == [("retained-graph", os.path.abspath(__file__), line)]
    folder = tmp_path / "run" / "gradviz"  # <args.output_dir>/gradviz
    doc = json.loads((folder / "report.json").read_text())
    assert [(d["code"], d["location"]["line"]) for d in doc["diagnostics"]] == [("retained-graph", line)]
    assert max(b["iteration"] for b in doc["backwards"]) == 5  # six steps traced
    assert (folder / "report.html").exists()
    warned = [m for level, m in hf_log if level == "WARNING"]
    assert len(warned) == 1 and warned[0].startswith(f"gradviz: retained-graph (warning) at "
                                                     f"{os.path.abspath(__file__)}:{line}: ")


def test_below_fail_on_training_ends_with_a_warning_and_the_counts_in_the_log_history(tmp_path):
    callback = GradvizCallback(fail_on="error", light=False, pictures=False)
    with pytest.warns(GradvizWarning, match="1 diagnostic, none at or above fail_on='error' .first: retained-graph"):
        trainer = train(tmp_path, callback, KeepsLosses, steps=6)
    assert trainer.state.log_history[-1] == {"gradviz/errors": 0, "gradviz/warnings": 1, "gradviz/infos": 0,
                                             "step": 6}


def test_a_clean_run_stays_silent(tmp_path, hf_log):
    callback = GradvizCallback(out_dir=str(tmp_path / "clean"), fail_on="warning", pictures=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", GradvizWarning)
        train(tmp_path, callback)
    doc = json.loads((tmp_path / "clean" / "report.json").read_text())
    assert doc["diagnostics"] == [] and doc["backwards"]
    assert [level for level, _ in hf_log] == ["INFO"]
    assert hf_log[0][1] == f"gradviz: no diagnostics; report in {tmp_path / 'clean' / 'report.html'}"


def test_chosen_steps_are_the_only_ones_traced(tmp_path):
    callback = GradvizCallback(steps=2, light=False, fail_on="never", pictures=False)
    train(tmp_path, callback, steps=4)
    assert len(callback.document["backwards"]) == 2  # the first two of four steps


def test_finish_after_train_raised_writes_the_report(tmp_path):
    class Breaks(transformers.Trainer):
        def compute_loss(self, model, inputs, return_outputs=False, **kwargs):
            if self.state.global_step == 1:
                raise ValueError("bad batch")
            return super().compute_loss(model, inputs, return_outputs=return_outputs, **kwargs)

    callback = GradvizCallback(light=False, pictures=False)
    with pytest.raises(ValueError) as raised:
        train(tmp_path, callback, Breaks)
    doc = callback.finish(raised.value)
    assert len(doc["backwards"]) == 1
    assert doc["status"]["exception"]["type"] == "ValueError"
    assert json.loads((tmp_path / "run" / "gradviz" / "report.json").read_text())["backwards"] == doc["backwards"]
