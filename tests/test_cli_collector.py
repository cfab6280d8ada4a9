"""The collector around gradviz's own work in a `gradviz run` (cli/collector.py): gradviz's tracer is imported after
torch with the collector off; from the script's start to the run's end what existed is frozen, the run's dead
objects (the trace, the script's globals) are collected once the script has ended, and the heap is given back."""

import gc
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from gradviz.cli import pipeline
from gradviz.cli.output import Output

REPO = Path(__file__).resolve().parent.parent

IMPORTS = """\
import gc, sys

class Spy:
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name == "gradviz.tracing":
            sys.__stderr__.write(f"TRACING torch={'torch' in sys.modules} collector={gc.isenabled()}\\n")
        return None

sys.meta_path.insert(0, Spy)
from gradviz.cli.engine import unsupported_torch

assert unsupported_torch() is None
sys.__stderr__.write(f"AFTER collector={gc.isenabled()}\\n")
"""


def test_the_tracer_is_imported_after_torch_with_the_collector_off(tmp_path):
    pytest.importorskip("torch")
    (tmp_path / "probe.py").write_text(IMPORTS)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "probe.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=240)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith(("TRACING", "AFTER"))]
    assert lines == ["TRACING torch=True collector=False", "AFTER collector=True"]


CYCLE = """\
import gc
import weakref

import gv_probe

import gradviz as torch


class Node:
    pass


node = Node()
node.me = node  # freed only by the collector once the script's globals go
gv_probe.ref = weakref.ref(node)
gv_probe.during = gc.get_freeze_count()
x = torch.tensor([1.0, 2.0], requires_grad=True)
(x * 3).sum().backward()
"""


@pytest.fixture
def probe(monkeypatch):
    if not gc.isenabled() or gc.get_freeze_count():
        pytest.skip("the collector is off or the test process froze objects")
    module = types.ModuleType("gv_probe")
    monkeypatch.setitem(sys.modules, "gv_probe", module)
    return module


def _run(tmp_path, monkeypatch, probe):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cycle.py").write_text(CYCLE)
    seen = {}
    write = pipeline.write_artifacts

    def write_artifacts(*args, **kwargs):
        seen["frozen"] = gc.get_freeze_count()
        seen["freed"] = probe.ref() is None
        return write(*args, **kwargs)

    monkeypatch.setattr(pipeline, "write_artifacts", write_artifacts)
    opts = pipeline.RunOptions(script="cycle.py", out_dir="here", draw=False, fail_on="never", engine="gradviz")
    assert pipeline.run(Output(quiet=True), opts) == 0
    return seen


def test_the_run_freezes_the_heap_collects_its_dead_objects_and_gives_the_heap_back(tmp_path, monkeypatch, probe,
                                                                                  capsys):
    seen = _run(tmp_path, monkeypatch, probe)
    assert probe.during > 0  # what existed before the script is frozen while it runs (gradviz's engine too)
    assert seen == {"frozen": seen["frozen"], "freed": True} and seen["frozen"] > 0
    assert gc.get_freeze_count() == 0


def test_a_collector_switched_off_is_left_alone(tmp_path, monkeypatch, probe, capsys):
    gc.disable()
    try:
        seen = _run(tmp_path, monkeypatch, probe)
        assert not gc.isenabled()
    finally:
        gc.enable()
    assert probe.during == 0 and seen["frozen"] == 0 and gc.get_freeze_count() == 0
