"""A stopped trace lets its records go: nothing of PyTorch's keeps the adapter's wrappers, and through them the
trace, alive after the stop (gradviz run writes its artifacts with the trace's memory free again).

Each case runs in a fresh interpreter: dynamo, which keeps the cache at stake, must load during the trace, on
the script's first optimizer, as it does under ``gradviz run``."""

import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = """
import gc, sys, weakref
import torch
import gradviz
assert "torch._dynamo" not in sys.modules, "dynamo loaded before the trace: the case tests nothing"
tr = gradviz.trace(engine="torch")
with tr:
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Dropout(0.1), torch.nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)  # loads dynamo (add_param_group), the trace attached
    model(torch.randn(2, 3)).sum().backward()
    opt.step()
builder = weakref.ref(tr.builder)
del tr
gc.collect()
from torch._dynamo.trace_rules import get_torch_obj_rule_map
rules = get_torch_obj_rule_map()
print("builder alive" if builder() is not None else "builder freed")
print("dropout known" if torch.nn.functional.dropout in rules else "dropout unknown")
print("wrappers kept" if any(getattr(f, "__module__", "") and "gradviz" in f.__module__ for f in rules
                             if callable(f)) else "no wrappers")
"""


def test_a_stopped_trace_is_freed_and_dynamo_sees_torchs_own_functions():
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[:3] == ["builder freed", "dropout known", "no wrappers"]
