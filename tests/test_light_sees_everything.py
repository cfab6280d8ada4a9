"""The default (light) mode names every classic mistake `--full` names, at the same line, on any iteration.

Two ways of asking it. The late mistakes (``tests/late_mistakes/``): each script makes one mistake once, at an
iteration the schedule does not sample (45, 53, 60, 61, 77, 97), and the default mode must name it at its marked
line on both engines, as the full trace does; a loss-shape mistake (loss-broadcast, softmax-wrong-dim) first made
on a light iteration is named at its line once the iterations after it are full, and one made on that light
iteration only is listed in ``unseen`` (its line was not recorded; real PyTorch). And the corpus: every sample
and every real-PyTorch script of the tests, traced in full and with every iteration light that the schedule
allows (``full_steps=0``), must give the same (code, file, line) set.
"""

import json
import os
import sys
from pathlib import Path

import pytest

from tests.marked_lines import marked_line
from tests.shared_traces import default_torch_trace, traced

pytestmark = pytest.mark.filterwarnings("ignore")

ROOT = Path(__file__).resolve().parent.parent
LATE = ROOT / "tests" / "late_mistakes"
SAMPLES = ROOT / "samples"
EXPECTED = json.loads((SAMPLES / "expected.json").read_text())

LATE_CASES = {  # script -> the code it must be named by, at its "# MARK" line
    "none_grad_at_77.py": "none-grad",
    "stale_version_at_53.py": "stale-version",
    "silent_inplace_at_61.py": "silent-inplace",
    "graph_freed_at_45.py": "graph-freed",
    "nan_inf_at_97.py": "nan-inf",
    "grad_accumulation_at_60.py": "grad-accumulation",
    "none_grad_at_1050.py": "none-grad",  # past a thousand iterations, between the samples 1,024 and 2,048
    "nan_in_the_data_at_70.py": "nan-inf",  # named at the line that loaded the batch, not at the op receiving it
    "nan_in_a_batch_at_83.py": "nan-inf",  # made inside a generator; the op saved a flattened view of it
    "out_write_at_57.py": "stale-version",  # torch.mul(h, 0.5, out=h) on a saved sigmoid output
    "out_data_write_at_59.py": "silent-inplace",  # torch.clamp(e.data, ..., out=e.data)
    "numpy_write_at_63.py": "silent-inplace",  # e.detach().numpy() written into before backward
}


def found(doc):
    return sorted({(d["code"], os.path.basename((d.get("location") or {}).get("file") or ""),
                    (d.get("location") or {}).get("line")) for d in doc["diagnostics"]})


@pytest.mark.parametrize("engine", ["torch", "gradviz"])
@pytest.mark.parametrize("name", sorted(LATE_CASES))
def test_a_mistake_made_once_late_is_named_at_its_line_by_the_default_mode(name, engine):
    if engine == "torch":
        pytest.importorskip("torch")
    path = LATE / name
    light = traced(path, engine, light=True)
    full = traced(path, engine, light=False)
    line = marked_line(path, "# MARK")
    assert (LATE_CASES[name], name, line) in found(light), [d["message"] for d in light["diagnostics"]]
    assert found(light) == found(full)
    assert light["internal_errors"] == [] and full["internal_errors"] == []
    # the iteration was light: the watch saw it, and the iterations after it were traced in full
    assert light["schedule"]["light_iterations"] > 30
    assert any(r["why"] == "finding" or r["why"] == "nonfinite" for r in light["schedule"]["full"])


LOSS_SHAPES = {"loss_broadcast": ("loss-broadcast", "a (16, 1) value broadcast to (16, 16) by SubBackward0"),
               "softmax_wrong_dim": ("softmax-wrong-dim", "LogSoftmaxBackward0 over dim 0 (the batch) of a (16, 3)")}


@pytest.mark.parametrize("name", sorted(LOSS_SHAPES))
def test_a_loss_shape_mistake_from_a_late_light_iteration_on_is_named_at_its_line(name):
    """The branch is taken from step 77 on, a light iteration: the default mode sees it near the loss, makes the
    iterations after it full, and names it at the line --full names."""
    pytest.importorskip("torch")
    path = LATE / f"{name}_from_77.py"
    code = LOSS_SHAPES[name][0]
    light, full = traced(path, "torch", light=True), traced(path, "torch", light=False)
    assert (code, path.name, marked_line(path, "# MARK")) in found(full)
    assert found(light) == found(full)
    if not _nodes_carry_shapes() and name == "loss_broadcast":
        assert_loss_shapes_unseen(light, path)
    assert any(r["first"] == 78 and r["why"] == "finding" for r in light["schedule"]["full"])
    assert light["internal_errors"] == []


@pytest.mark.parametrize("name", sorted(LOSS_SHAPES))
def test_a_loss_shape_mistake_made_once_on_a_light_iteration_is_listed_as_unseen(name):
    """The branch is taken at step 77 only: --full names its line; the default mode, which recorded no op of
    that iteration, says in ``unseen`` what it saw there and how to get the line, instead of nothing."""
    pytest.importorskip("torch")
    path = LATE / f"{name}_at_77.py"
    code, what = LOSS_SHAPES[name]
    light, full = traced(path, "torch", light=True), traced(path, "torch", light=False)
    if name == "loss_broadcast":  # (--full keeps iteration 77's graph: a new structure, its shapes differ)
        assert [(c, line) for c, _, line in found(full)] == [(code, marked_line(path, "# MARK"))]
    assert [d["code"] for d in light["diagnostics"]] == []
    if not _nodes_carry_shapes() and name == "loss_broadcast":
        assert_loss_shapes_unseen(light, path)
        return
    (entry,) = [u for u in light["unseen"] if u["kind"] == "not-recorded"]
    assert entry["what"].startswith(f"the line of {what}") and entry["what"].endswith(", at iteration 77")
    assert entry["how"] == f"{code}: a light iteration records no op's line"
    assert entry["location"]["line"] == marked_line(path, "loss.backward()")
    assert entry["advice"].startswith("`--trace-steps 77:77` (or `--full`) records that iteration")
    assert not [u for u in full["unseen"] if u["kind"] == "not-recorded"]


def _nodes_carry_shapes():
    import torch

    from gradviz.tracing.adapters.torch.compat import _node_shapes

    return _node_shapes(torch)


def assert_loss_shapes_unseen(light, path):
    """A torch whose nodes carry no output shapes (2.4): a light iteration cannot see a loss-broadcast. The loss
    whose nodes first differ from the recorded ones (iteration 77) is listed, at its backward's line, with the
    rerun that sees it; the iterations after it are full."""
    (entry,) = [u for u in light["unseen"] if u["kind"] == "not-recorded"]
    assert entry["what"] == ("the shapes in the loss of iteration 77, where an elementwise op meets a value needing "
                             "no gradient as no recorded iteration's loss does (a loss-broadcast there is not seen)")
    assert "autograd nodes carry no output shapes (_input_metadata)" in entry["how"]
    assert entry["location"]["line"] == marked_line(path, "loss.backward()")
    assert entry["advice"].startswith("`--trace-steps 77:77` (or `--full`) records that iteration")
    assert any(r["first"] == 78 and r["why"] == "finding" for r in light["schedule"]["full"])


def test_the_stale_version_found_late_names_the_saving_node_and_the_failed_backward():
    pytest.importorskip("torch")
    path = LATE / "stale_version_at_53.py"
    doc = traced(path, "torch", light=True)
    (d,) = [d for d in doc["diagnostics"] if d["code"] == "stale-version"]
    assert d["severity"] == "error"
    assert "SigmoidBackward0" in d["message"] and "`h.mul_(0.5)`" in d["message"]
    assert "version 0 → 1" in d["message"]
    backward_line = marked_line(path, "loss.backward()")
    assert f"backward at line {backward_line} failed on it" in d["message"]


def test_a_nan_made_late_is_named_at_the_op_that_made_it():
    pytest.importorskip("torch")
    path = LATE / "nan_inf_at_97.py"
    doc = traced(path, "torch", light=True)
    (d,) = [d for d in doc["diagnostics"] if d["code"] == "nan-inf"]
    assert d["message"].startswith(f"SqrtBackward0 at line {marked_line(path, '# MARK')} produced NaN/Inf")
    assert "iteration 97" in d["message"]
    nonfinite = doc["schedule"]["light"]["nonfinite_loss"]
    assert (nonfinite["iteration"], nonfinite["op"], nonfinite["phase"]) == (97, "SqrtBackward0", "forward")


@pytest.mark.parametrize("light", [True, False])
@pytest.mark.parametrize("engine", ["torch", "gradviz"])
def test_a_nan_that_came_in_with_the_data_is_named_where_the_batch_was_loaded(engine, light):
    """A batch that already holds a NaN at iteration 70: both modes name the tensor and the line that loaded it,
    the op that received it as related, and give the data hint, not the clamp / learning-rate one."""
    if engine == "torch":
        pytest.importorskip("torch")
    path = LATE / "nan_in_the_data_at_70.py"
    doc = traced(path, engine, light=light)
    (d,) = [d for d in doc["diagnostics"] if d["code"] == "nan-inf"]
    load = marked_line(path, "# MARK")
    assert d["location"]["line"] == load
    assert d["message"].startswith(f"the NaN/Inf came in with the data: `x`, made at line {load}, already held it "
                                   f"when AddmmBackward{'0' if engine == 'torch' else ''} received it")
    assert "clean the data set" in d["hint"] and "learning rate" not in d["hint"]
    where = {r["role"]: r["location"]["line"] for r in d.get("related") or ()}
    if light:
        assert where == {"the loss was backwarded here": marked_line(path, "loss.backward()")}
        assert "iteration 70" in d["message"]
    else:
        assert where == {f"AddmmBackward{'0' if engine == 'torch' else ''} received it here":
                         marked_line(path, "loss = ((model(x)")}
        assert doc["first_nonfinite"]["data"] == "x"
        assert doc["first_nonfinite"]["data_location"]["line"] == load


@pytest.mark.parametrize("engine", ["torch", "gradviz"])
def test_a_hook_registered_on_a_light_iteration_is_recorded_at_its_line(engine):
    """From iteration 71 on, a hook per step and graphs kept alive: the light iteration 71 records the hook's
    registration at its line, and its call at the backward's, and retained-graph names the hook's line as --full
    does."""
    if engine == "torch":
        pytest.importorskip("torch")
    path = LATE / "hook_and_retained_graph_from_71.py"
    hook_line, backward_line = marked_line(path, "# MARK"), marked_line(path, "# RETAIN")
    light = traced(path, engine, light=True)
    full = traced(path, engine, light=False)
    hooks = [e for e in light["events"] if e["kind"] == "hook"]
    assert [(e["event"], e["location"]["line"], e["iteration"]) for e in hooks[:2]] == \
        [("register", hook_line, 71), ("call", backward_line, 71)]
    assert hooks[0]["hook_name"] == "<lambda>"
    assert 71 not in [r["first"] for r in light["schedule"]["full"]]  # it was a light iteration
    for doc in (light, full):
        (d,) = [d for d in doc["diagnostics"] if d["code"] == "retained-graph"]
        assert f"The hook registered at line {hook_line} holds a Variable of the graph." in d["message"]
        assert {r["role"]: r["location"]["line"] for r in d["related"]}["hook registered here"] == hook_line
    assert found(light) == found(full)


def test_a_clean_300_step_run_using_every_watched_call_reports_nothing():
    pytest.importorskip("torch")
    doc = traced(LATE / "clean_300_steps.py", "torch", light=True)
    assert doc["diagnostics"] == [] and doc["internal_errors"] == []
    assert doc["schedule"]["light_iterations"] > 280  # it stayed light: nothing escalated
    assert not any(r["why"] == "finding" for r in doc["schedule"]["full"])


def _corpus():
    cases = [(f"samples/{name}", "torch" if e["torch"] else "gradviz-native")
             for name, e in sorted(EXPECTED.items()) if not e.get("ranks")]
    cases += [(f"tests/torch_scripts/{p.name}", "torch") for p in sorted((ROOT / "tests/torch_scripts").glob("*.py"))]
    return cases


@pytest.mark.parametrize("script,engine", _corpus())
def test_every_light_iteration_names_what_a_full_trace_names(script, engine):
    """(code, file, line) of every diagnostic: the same with every iteration the schedule allows light."""
    if engine == "torch":
        pytest.importorskip("torch")
    engine = "gradviz" if engine == "gradviz-native" else engine
    path = ROOT / script
    run_engine = engine if engine == "torch" else "auto"  # the samples import gradviz themselves
    if engine == "torch" and script.startswith("samples/"):
        # the full trace test_torch_parity and test_torch_exact_memory compare with, made once per process
        # (tests/shared_traces.py); the light one is run the same way
        full = default_torch_trace(path)
        light = traced(path, "torch", path.read_text(), light=True, full_steps=0)
    else:
        full = traced(path, run_engine, light=False)
        light = traced(path, run_engine, light=True, full_steps=0)
    assert found(light) == found(full)
    assert light["internal_errors"] == []


@pytest.mark.parametrize("mode", ["--light", "--full"])
def test_graphs_kept_by_a_list_are_named_at_the_line_that_fills_it(mode, tmp_path):
    """``history.append(loss)`` from iteration 40 on: the graphs pile up late (judged from where they began to),
    and the list that holds them is named at its line, in both modes."""
    pytest.importorskip("torch")
    from click.testing import CliRunner

    from gradviz.cli import main

    path = LATE / "retained_graph_from_40.py"
    result = CliRunner().invoke(main, ["run", mode, "-q", "--no-render", "--out", str(tmp_path), str(path)],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    doc = json.loads((tmp_path / "report.json").read_text())
    (d,) = [d for d in doc["diagnostics"] if d["code"] == "retained-graph"]
    assert d["location"]["line"] == marked_line(path, "# MARK")
    assert "`history` holds 50 of their outputs" in d["message"]
    assert doc["memory"]["holders"] == [{"name": "history", "count": 50, "location": d["location"]}]


def test_a_spawned_worker_reading_a_non_leaf_grad_after_its_loop_is_named(tmp_path):
    """torch.multiprocessing.spawn: each worker is traced on the default schedule; the read after the loop, on
    what the schedule made a light iteration, is named at its line."""
    pytest.importorskip("torch")
    import subprocess

    path = LATE / "spawned_worker_grad_read.py"
    run = subprocess.run([sys.executable, "-m", "gradviz", "run", "--no-render", "--fail-on", "never", "--out",
                          str(tmp_path), str(path)], capture_output=True, text=True, timeout=300, cwd=str(LATE))
    assert run.returncode == 0, run.stderr
    doc = json.loads((tmp_path / "report.json").read_text())
    reads = [d for d in doc["diagnostics"] if d["code"] == "none-grad"]
    assert [(d["location"]["line"], d["count"]) for d in reads] == [(marked_line(path, "# MARK"), 2)]


def test_a_nan_made_by_an_operator_is_named_with_its_op_iteration_and_rerun():
    """`** 0.5` has no name to find in the source: the report names the op, the iteration and the rerun that
    traces it in full, at the backward's line, and says it does not know the op's line."""
    pytest.importorskip("torch")
    path = LATE / "nan_by_an_operator_at_97.py"
    doc = traced(path, "torch", light=True)
    (d,) = [d for d in doc["diagnostics"] if d["code"] == "nan-inf"]
    assert d["location"]["line"] == marked_line(path, "# BACKWARD")
    assert d["message"].startswith("the loss was nan at iteration 97 (made by PowBackward0, whose line no single "
                                   "call in the file names)")
    assert "--trace-steps 97:97" in d["hint"]


def test_a_light_run_says_what_was_recorded_and_what_was_watched(tmp_path):
    """300 iterations, 9 in full: the terminal says so and counts every backward call; report.json's memory
    points of light iterations are not measured, and report.html's chart says so instead of dropping to 0."""
    pytest.importorskip("torch")
    import re
    import subprocess

    # a process of its own: threads other tests left in this one would be listed as work beyond the trace's sight
    result = subprocess.run([sys.executable, "-m", "gradviz", "run", "--no-render", "--out", str(tmp_path),
                             str(LATE / "clean_300_steps.py")], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert "gradviz: no mistakes seen in 300 iterations (9 recorded in full, 9 graphs; 291 watched light)" in text
    assert "iterations 300 iterations: 9 recorded in full (0–2, 8, 16, 32, 64, 128 …), 291 watched light" in text
    assert "graphs 9 recorded; structure 0: " in text
    assert "backward calls 300 (9 recorded)" in text
    doc = json.loads((tmp_path / "report.json").read_text())
    series = doc["memory"]["series"]
    light = [p for p in series if p.get("measured") is False]
    # every light iteration but the last, whose point is the one taken at the stop
    assert len(light) == 290 and all("peak_retained_bytes" not in p for p in light)
    assert "291 iterations were light" in doc["dropped"]["note"]
    page = (tmp_path / "report.html").read_text()
    assert f"290 of {len(series)} iterations were light" in page
    peaks = re.search(r'id="memory-peaks"[^>]*points="([^"]*)"', page).group(1)
    assert len(peaks.split()) == len(series) - 290  # the measured points only: no light zeros


def test_the_memory_a_checkpoint_recompute_holds_is_marked_not_measured():
    """torch.utils.checkpoint: the saved-attribute figures miss what backward's recompute holds (exact memory
    counts it), so the document lists it, at the checkpoint's line, with the --exact-memory advice; exact memory
    does not list it."""
    pytest.importorskip("torch")
    path = LATE / "checkpointed_block.py"
    doc = traced(path, "torch", light=True)
    # (a torch whose SavedTensor has no data access adds its own entry for the nodes built under saved-tensor hooks)
    what = "the memory a checkpointed segment holds while backward recomputes it"
    (entry,) = [u for u in doc["unseen"] if u["kind"] == "not-measured" and u["what"] == what]
    assert entry["location"]["line"] == marked_line(path, "checkpoint(block")
    import torch

    from gradviz.tracing.adapters.torch.compat import _exact_missing, _saved_access

    missing = _exact_missing(torch)
    if missing is not None:  # (torch 2.4: no hooks to measure it with; the advice says so instead)
        assert entry["count"] == 10 and entry["advice"] == f"torch {torch.__version__} cannot measure it (no {missing})"
        return
    assert entry["count"] == 10 and "--exact-memory" in entry["advice"]
    exact = traced(path, "torch", light=True, exact_memory=True)
    assert not [u for u in exact["unseen"] if u["kind"] == "not-measured" and u["what"] == what]
    if _saved_access(torch) == "data":
        assert exact["memory"]["peak_retained_bytes"] > doc["memory"]["peak_retained_bytes"]
    else:  # (read by unpacking, the segment's saved input is counted by the default too: equal on 2.9.1)
        assert exact["memory"]["peak_retained_bytes"] == doc["memory"]["peak_retained_bytes"]


def test_a_late_mistake_in_a_torchrun_rank_is_named_by_the_default_mode(tmp_path):
    """``gradviz torchrun``, 2 ranks on gloo (CPU), the default schedule: rank 1 reads a non-leaf's ``.grad`` at
    step 41, a light iteration; the merged report names it at its line, from rank 1 only."""
    pytest.importorskip("torch")
    import subprocess

    path = LATE / "torchrun_grad_read_at_41.py"
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    run = subprocess.run([sys.executable, "-m", "gradviz", "torchrun", "--no-render", "--fail-on", "never", "--out",
                          str(tmp_path / "out"), "--standalone", "--nproc-per-node", "2", str(path)],
                         capture_output=True, text=True, timeout=400, cwd=str(tmp_path), env=env)
    assert run.returncode == 0, run.stderr
    doc = json.loads((tmp_path / "out" / "report.json").read_text())
    line = marked_line(path, "# MARK")
    assert [(d["code"], d["location"]["line"]) for d in doc["diagnostics"]] == [("none-grad", line)]
    ranks = {r["process"]["rank"]: r for r in doc["ranks"]}
    assert [(d["code"], d["location"]["line"]) for d in ranks[1]["diagnostics"]] == [("none-grad", line)]
    assert ranks[0]["diagnostics"] == []
    schedule = ranks[1]["schedule"]
    assert schedule["light_iterations"] > 30
    # step 41 was watched light: the read escalated the iterations after it
    assert not any(r["first"] <= 41 <= r["last"] and r["why"] != "finding" for r in schedule["full"])
    assert any(r["why"] == "finding" for r in schedule["full"])


@pytest.mark.parametrize("engine", ["torch", "gradviz"])
def test_a_gradient_accumulation_loop_is_numbered_by_its_steps_from_the_start(engine):
    """4 backward calls per step, 60 steps: 60 iterations under the default schedule, the first step's four
    backward calls in iteration 0 (they were once counted as iterations of their own: 66 for 60 steps)."""
    if engine == "torch":
        pytest.importorskip("torch")
    doc = traced(LATE / "accumulate_4_per_step.py", engine, light=True)
    assert doc["iterations"] == 60
    assert [sum(1 for b in doc["backwards"] if b["iteration"] == it) for it in (0, 1, 2)] == [4, 4, 4]
    assert [(r["first"], r["last"]) for r in doc["schedule"]["full"]] == [(0, 2), (8, 8), (16, 16), (32, 32)]
    assert doc["schedule"]["light_iterations"] == 54
    assert doc["diagnostics"] == [] and doc["internal_errors"] == []


def test_torch_compile_first_called_on_a_light_iteration_runs_as_it_does_alone(tmp_path):
    """The light watch puts its own ``Tensor.grad`` and ``Tensor.data`` in place, and dynamo's first import reads
    those attributes (torch 2.4 and 2.9 raised AttributeError in the script there); the compiler's later stage
    then calls the modules on fake tensors of symbolic shape. A fresh process, so that dynamo is not imported yet:
    the script runs to its end, and nothing of the compiler's is an internal error."""
    pytest.importorskip("torch")
    import subprocess

    path = LATE / "compiled_at_5.py"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    result = subprocess.run([sys.executable, "-m", "gradviz", "run", "--no-render", "--out", str(tmp_path),
                             str(path)], capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("loss ")  # (the script's last line: it ran to its end)
    doc = json.loads((tmp_path / "report.json").read_text())
    assert doc["internal_errors"] == [] and doc["schedule"]["light_iterations"] > 0
    assert [(u["kind"], u["location"]["line"]) for u in doc["unseen"] if u["kind"] == "compiled-region"] == [
        ("compiled-region", marked_line(path, "loss = nn.functional"))]


def test_the_watched_tensor_attributes_answer_as_the_ones_they_stand_in_for():
    """Code that inspects ``Tensor.grad`` and ``Tensor.data`` (dynamo's own import does) sees what the C
    attributes answer while the light watch stands in for them."""
    torch = pytest.importorskip("torch")
    import gradviz

    base = torch._C.TensorBase.__dict__
    with gradviz.trace(engine="torch", light=True, full_steps=0):
        x = torch.randn(3, requires_grad=True)
        for _ in range(10):  # (the watch goes in place once an iteration is light)
            (x * 2).sum().backward()
            if "grad" in torch.Tensor.__dict__:
                break
        for name in ("grad", "data"):
            watched = torch.Tensor.__dict__[name]
            assert watched is not base[name]  # (the watch is in place)
            assert watched.__get__.__self__.__objclass__ is base[name].__objclass__
            assert watched.__name__ == name
