"""The plain-PyTorch sample really is the seed's failing code: real PyTorch raises the seed's error on it."""

import runpy
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

SAMPLE = Path(__file__).resolve().parent.parent / "samples" / "torch_script_unmodified.py"
SEED_LINES = ("v = Variable(y1.data, requires_grad=training)         # Its all about this line!",
              "y1.backward(v.grad)", "y1.backward(y1.grad) # it breaks here", "self.step()")


def test_sample_contains_the_question_code_as_is():
    source = SAMPLE.read_text()
    assert "import torch\n" in source and "import gradviz" not in source
    for text in SEED_LINES:
        assert text in source


def test_real_pytorch_raises_the_seed_error(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", [str(SAMPLE)])
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
        runpy.run_path(str(SAMPLE), run_name="__main__")
