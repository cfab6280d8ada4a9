"""``gradviz run``, ``gradviz graph``, ``gradviz explain`` through click's test runner, plus one real subprocess.

Scripts run in-process (the runner restores the interpreter afterwards), so these tests stay fast. Rich prints
to a 250-column console so table cells are not wrapped and lines can be compared exactly.
"""

import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest
from click.testing import CliRunner

from gradviz import __version__
from gradviz.cli import main

NEEDS_DOT = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot program is not installed")

CLEAN = """\
import gradviz
import gradviz.nn as nn

model = nn.Linear(3, 2)
x = gradviz.randn(4, 3)
print("training")
for step in range(3):
    model.zero_grad()
    loss = model(x).pow(2).mean()
    loss.backward()
print("done")
"""

# Catches the exception it causes, so the run finishes with an error diagnostic and exit status 0 of its own.
CAUGHT_NONSCALAR = """\
import gradviz

x = gradviz.ones(3, requires_grad=True)
y = x * 2
try:
    y.backward()
except RuntimeError as err:
    print("caught:", err)
"""

# Only a warning: the .grad of a non-leaf read as None.
NONE_GRAD_READ = """\
import gradviz

x = gradviz.ones(3, requires_grad=True)
y = x * 2
y.sum().backward()
print("y.grad is", y.grad)
"""

RAISES = """\
import gradviz

def forward(x):
    return x * 2

x = gradviz.ones(3, requires_grad=True)
y = forward(x)
y.backward()
"""

# The seed question's reproduction (its first answer), pasted unmodified: a plain PyTorch script.
SEED_TORCH = """\
import torch
import torch.nn as nn


torch.manual_seed(42)


class Model1(nn.Module):

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.pow(3)


class Model2(nn.Module):

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x / 2


model1 = Model1()
model2 = Model2()
criterion = nn.MSELoss()

X = torch.randn(1, 5, requires_grad=True)
y = torch.randn(1, 5)

y1 = model1(X)
y2 = model2(y1)

loss = criterion(y2, y)
# We are going to backprop 2 times, so we need to
# retain_graph=True while first backward
loss.backward(retain_graph=True)

try:
    y1.backward(y1.grad)
except RuntimeError as err:
    print(err)
    print('y1.grad: ', y1.grad)
"""

# 80 ops in no repeating pattern, so the renderer cannot fold them into a loop: only --max-nodes shrinks it.
IRREGULAR_CHAIN = """\
import random
import gradviz

rng = random.Random(0)
x = gradviz.ones(2, requires_grad=True)
y = x
for _ in range(80):
    y = rng.choice([lambda v: v * 1.01, lambda v: v + 0.5, lambda v: v.tanh(), lambda v: v.sin()])(y)
y.sum().backward()
"""

UNSUPPORTED_TORCH = """\
import torch

x = torch.randn(4)
spectrum = torch.fft.rfft(x)
"""


@pytest.fixture
def cli(tmp_path, monkeypatch):
    """Invoke the CLI in a fresh working folder; returns (result, stdout, stderr)."""
    monkeypatch.chdir(tmp_path)
    runner = CliRunner(env={"COLUMNS": "250"})

    def invoke(*args):
        result = runner.invoke(main, list(args), catch_exceptions=False)
        return result

    return invoke


def script(tmp_path, text, name="script.py"):
    path = tmp_path / name
    path.write_text(text)
    return name  # relative to the working folder (tmp_path), as a user would type it


def stderr_of(result):
    """stderr without Python's warning lines (the engine warns on a non-leaf `.grad` read, as PyTorch does);
    whether they show depends on the process's warning filters, not on gradviz."""
    lines, skip = [], False
    for line in result.stderr.splitlines(keepends=True):
        if skip and line.startswith("  "):
            continue
        skip = bool(re.match(r"^\S+:\d+: \w*Warning: ", line))
        if not skip:
            lines.append(line)
    return "".join(lines)


def no_gradviz_traceback(result):
    assert "Traceback" not in result.stderr
    assert "Traceback" not in result.stdout


# ----- the group -------------------------------------------------------------------------------------------------
def test_version(cli):
    result = cli("--version")
    assert (result.exit_code, result.stdout) == (0, f"gradviz, version {__version__}\n")


def test_help_lists_the_commands(cli):
    result = cli("--help")
    assert result.exit_code == 0
    commands = [line.split()[0] for line in result.stdout.split("Commands:\n")[1].splitlines() if line.strip()]
    assert commands == ["explain", "graph", "run", "supported", "torchrun"]


def test_help_does_not_import_the_heavy_parts():
    code = ("import sys; from gradviz.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "heavy = [m for m in ('rich', 'graphviz', 'gradviz.tracing', 'gradviz.rendering', 'gradviz.diagnose')"
            " if m in sys.modules]\nprint('HEAVY', heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[-1] == "HEAVY []"


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["run", "--help"], ["graph", "--help"],
                                  ["explain", "--help"], ["supported", "--help"]])
def test_help_and_version_load_no_engine_and_no_torch(argv):
    """`gradviz --help` stays quick by importing neither numpy, the engine nor torch (docs/performance.md)."""
    code = ("import sys; from gradviz.cli import main\n"
            f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
            "loaded = [m for m in sys.modules if m.split('.')[0] in ('numpy', 'torch') or m.startswith("
            "('gradviz._namespace', 'gradviz.autograd', 'gradviz.ops', 'gradviz.nn', 'gradviz.functions'))]\n"
            "print('LOADED', sorted(loaded))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "Usage: " in out or f"version {__version__}" in out
    assert out.splitlines()[-1] == "LOADED []"


# ----- run: bad input ------------------------------------------------------------------------------------------
def test_run_missing_script(cli):
    result = cli("run", "nope.py")
    assert result.exit_code == 1
    assert stderr_of(result) == "gradviz: error: no such script `nope.py`\n"
    assert result.stdout == ""


def test_run_folder(cli, tmp_path):
    (tmp_path / "pkg").mkdir()
    result = cli("run", "pkg")
    assert (result.exit_code, stderr_of(result)) == (1, "gradviz: error: `pkg` is a folder, not a Python script\n")


def test_run_syntax_error(cli, tmp_path):
    name = script(tmp_path, "x = 1\nfor i in range(3)\n    print(i)\n")
    result = cli("run", name)
    assert result.exit_code == 1
    assert stderr_of(result) == f"gradviz: error: syntax error in `{name}:2`: expected ':'\n"
    no_gradviz_traceback(result)


def test_run_unwritable_output_folder_still_prints_the_report(cli, tmp_path):
    name = script(tmp_path, CLEAN)
    (tmp_path / "a_file").write_text("")
    result = cli("run", "--out", "a_file/sub", name)
    assert result.exit_code == 1
    assert stderr_of(result).startswith("gradviz: error: cannot create output folder `a_file/sub`: ")
    assert stderr_of(result).count("\n") == 1
    assert "training\ndone\n" in result.stdout
    assert "Summary" in result.stdout or "graph" in result.stdout.lower()
    assert "Wrote" not in result.stdout


# ----- run: the script's own ending ------------------------------------------------------------------------------
def test_run_clean_script(cli, tmp_path):
    name = script(tmp_path, CLEAN)
    result = cli("run", "--no-render", name)
    assert result.exit_code == 0, stderr_of(result)
    out_dir = os.path.join("gradviz-out", "script")
    # the verdict first, then the summary: a clean run reads in a dozen lines
    assert [line.rstrip() for line in result.stdout.splitlines()] == [
        "training", "done",
        "gradviz: no mistakes seen in 3 graphs",
        "",
        "Summary",
        f"script          {name}",
        "graphs          3 built; structure 0: 3 nodes, seen 3× (iterations 0–2)",
        "backward calls  3",
        "parameters      2, all got a gradient",
        "memory          peak 80 B held for backward, 0 B after each of the 3 iterations",
        "",
        f"Wrote 2 files to {out_dir}{os.sep}", "  report.json", "  report.html"]
    doc = json.loads((tmp_path / out_dir / "report.json").read_text())
    assert doc["format"] == "gradviz-trace" and doc["script"] == name
    assert [b["iteration"] for b in doc["backwards"]] == [0, 1, 2]
    assert [d for d in doc["diagnostics"] if d["severity"] in ("warning", "error")] == []
    assert "<html" in (tmp_path / out_dir / "report.html").read_text().lower()
    assert stderr_of(result) == ""


def test_run_passes_arguments_through_to_the_script(cli, tmp_path):
    name = script(tmp_path, "import sys\nprint(sys.argv)\n")
    result = cli("run", "--no-render", name, "--lr", "0.1", "-q", "--out", "x")
    assert result.exit_code == 0
    assert result.stdout.splitlines()[0] == f"[{name!r}, '--lr', '0.1', '-q', '--out', 'x']"
    assert os.path.isdir(tmp_path / "gradviz-out" / "script")
    assert not os.path.exists(tmp_path / "x")


@pytest.mark.parametrize("call, code", [("sys.exit(3)", 3), ("sys.exit(0)", 0), ("sys.exit()", 0)])
def test_run_honours_sys_exit(cli, tmp_path, call, code):
    name = script(tmp_path, f"import sys\nprint('before')\n{call}\nprint('after')\n")
    result = cli("run", "--no-render", name)
    assert result.exit_code == code
    assert result.stdout.startswith("before\n") and "after" not in result.stdout
    assert "Wrote 2 files" in result.stdout


def test_run_sys_exit_with_a_message(cli, tmp_path):
    name = script(tmp_path, "import sys\nsys.exit('bad config')\n")
    result = cli("run", "--no-render", name)
    assert (result.exit_code, stderr_of(result)) == (1, "bad config\n")


def test_run_script_raising_shows_user_frames_and_still_reports(cli, tmp_path):
    name = script(tmp_path, RAISES)
    result = cli("run", "--no-render", name)
    assert result.exit_code == 1
    assert stderr_of(result) == (
        "Traceback (most recent call last):\n"
        f'  File "{name}", line 8, in <module>\n'
        "    y.backward()\n"
        "gradviz.errors.NonScalarBackwardError: grad can be implicitly created only for scalar outputs\n")
    assert "nonscalar-backward" in result.stdout
    assert f"{name}:8" in result.stdout
    doc = json.loads((tmp_path / "gradviz-out" / "script" / "report.json").read_text())
    assert doc["status"]["completed"] is False
    assert doc["status"]["exception"]["type"] == "NonScalarBackwardError"
    assert [d["code"] for d in doc["diagnostics"] if d["severity"] == "error"] == ["nonscalar-backward"]
    assert len(doc["graphs"]) == 1


# ----- run: --fail-on ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("fail_on, code", [("error", 1), ("warning", 1), ("never", 0)])
def test_fail_on_with_an_error_diagnostic(cli, tmp_path, fail_on, code):
    name = script(tmp_path, CAUGHT_NONSCALAR)
    result = cli("run", "--no-render", "--fail-on", fail_on, name)
    assert result.exit_code == code
    assert result.stdout.startswith("caught: grad can be implicitly created only for scalar outputs\n")
    if code:
        assert stderr_of(result).endswith(f"at or above `{fail_on}` (--fail-on {fail_on}): exit status 1\n")
    else:
        assert stderr_of(result) == ""


@pytest.mark.parametrize("fail_on, code", [("error", 0), ("warning", 1), ("never", 0)])
def test_fail_on_with_only_a_warning(cli, tmp_path, fail_on, code):
    name = script(tmp_path, NONE_GRAD_READ)
    result = cli("run", "--no-render", "--fail-on", fail_on, name)
    assert result.exit_code == code
    assert "none-grad" in result.stdout
    if code:
        assert stderr_of(result).splitlines()[-1] == (
            "gradviz: 1 diagnostic at or above `warning` (--fail-on warning): exit status 1")


def test_fail_on_default_is_error(cli, tmp_path):
    name = script(tmp_path, CAUGHT_NONSCALAR)
    assert cli("run", "--no-render", name).exit_code == 1


def test_fail_on_rejects_other_values(cli, tmp_path):
    name = script(tmp_path, CLEAN)
    result = cli("run", "--fail-on", "info", name)
    assert result.exit_code == 2
    assert "Invalid value for '--fail-on'" in stderr_of(result)


# ----- run: output modes ------------------------------------------------------------------------------------
def test_json_only_prints_the_document_and_nothing_else(cli, tmp_path):
    name = script(tmp_path, CLEAN)
    result = cli("run", "--json-only", name)
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert (doc["format"], doc["version"], doc["script"]) == ("gradviz-trace", 1, name)
    assert len(doc["backwards"]) == 3
    assert stderr_of(result) == "training\ndone\n"  # the script's prints, kept off stdout
    assert not os.path.exists(tmp_path / "gradviz-out")


def test_json_only_keeps_the_exit_status(cli, tmp_path):
    name = script(tmp_path, CAUGHT_NONSCALAR)
    result = cli("run", "--json-only", name)
    assert result.exit_code == 1
    assert [d["code"] for d in json.loads(result.stdout)["diagnostics"]].count("nonscalar-backward") == 1


def test_quiet_prints_nothing_but_writes_the_files(cli, tmp_path):
    name = script(tmp_path, CLEAN)
    result = cli("run", "--quiet", "--no-render", name)
    assert result.exit_code == 0
    assert result.stdout == "training\ndone\n"
    assert stderr_of(result) == ""
    assert sorted(os.listdir(tmp_path / "gradviz-out" / "script")) == ["report.html", "report.json"]


def test_quiet_still_reports_failure(cli, tmp_path):
    name = script(tmp_path, CAUGHT_NONSCALAR)
    result = cli("run", "-q", "--no-render", name)
    assert result.exit_code == 1
    assert result.stdout == "caught: grad can be implicitly created only for scalar outputs\n"
    assert stderr_of(result) == "gradviz: 1 diagnostic at or above `error` (--fail-on error): exit status 1\n"


def test_no_progress_line_when_not_a_terminal(cli, tmp_path):
    name = script(tmp_path, CLEAN)
    result = cli("run", "--no-render", name)
    assert "running…" not in result.stdout + stderr_of(result)


def test_progress_line_reads_the_trace_counters():
    import io

    from rich.console import Console

    from gradviz.cli.output import Output
    from gradviz.cli.session import _live_progress, progress_text

    class FakeTrace:
        stats = {"backward_calls": 12, "iterations": 12, "retained_bytes": 3 * 1024 * 1024}

    assert progress_text(FakeTrace()).plain == "running… 12 backward calls · 12 iterations · 3.0 MiB retained"
    output = Output()
    output.out = Console(file=io.StringIO(), force_terminal=True, width=100)
    with _live_progress(output, FakeTrace()):
        pass
    assert "12 backward calls" in output.out.file.getvalue()


# ----- run: pictures ---------------------------------------------------------------------------------------
@NEEDS_DOT
def test_run_writes_one_picture_per_structure_with_first_and_last_iteration(cli, tmp_path):
    name = script(tmp_path, CLEAN)
    result = cli("run", "--out", "out", name)
    assert result.exit_code == 0, stderr_of(result)
    doc = json.loads((tmp_path / "out" / "report.json").read_text())
    iteration = {g["id"]: g["iteration"] for g in doc["graphs"]}
    expected = []
    for s in doc["structures"]:
        # file names number structures as the summary does ("structure 0: …") and say which graph they show
        for which, gid in zip(("first", "last"), dict.fromkeys([s["first_graph"], s["last_graph"]])):
            seen = f" ({which} of {s['count']})" if s["count"] > 1 else ""
            expected.append((f"structure-{s['id']}-iter{iteration[gid]}.svg",
                             f"structure {s['id']}, iteration {iteration[gid]}{seen}"))
            assert f"structure {s['id']}: " in result.stdout
    assert len(expected) >= 2  # three iterations: at least a first and a last picture
    lines = result.stdout.splitlines()
    start = lines.index(f"Wrote {len(expected) + 2} files to out{os.sep}")
    width = max(len(name) for name, _ in expected)
    assert lines[start + 1:] == [f"  {name.ljust(width)}  {about}" for name, about in expected] + \
        ["  report.json", "  report.html"]
    for name, _ in expected:
        assert (tmp_path / "out" / name).read_text().lstrip().startswith(("<?xml", "<svg"))
    html = (tmp_path / "out" / "report.html").read_text()
    assert html.count("<svg") >= len(expected)


def test_pictures_to_draw_first_and_last_graph_of_each_structure():
    from gradviz.rendering.pictures import pictures_to_draw

    doc = {"graphs": [{"id": i, "iteration": it, "nodes": [i], "full": full}
                      for i, it, full in [(0, 0, True), (1, 0, True), (2, 1, True), (3, 5, True), (4, 6, False)]],
           "structures": [{"id": 0, "first_graph": 0, "last_graph": 3, "count": 3},
                          {"id": 1, "first_graph": 1, "last_graph": 1, "count": 1},
                          {"id": 2, "first_graph": 2, "last_graph": 4, "count": 2}]}
    assert [(p.graph, p.stem) for p in pictures_to_draw(doc)] == [
        (0, "structure-0-iter0"), (3, "structure-0-iter5"), (1, "structure-1-iter0"), (2, "structure-2-iter1")]
    assert [p.about for p in pictures_to_draw(doc)] == [
        "structure 0, iteration 0 (first of 3)", "structure 0, iteration 5 (last of 3)", "structure 1, iteration 0",
        "structure 2, iteration 1 (first of 2)"]


def test_pictures_to_draw_keeps_file_names_apart_within_one_iteration():
    from gradviz.rendering.pictures import pictures_to_draw

    doc = {"graphs": [{"id": 0, "iteration": 0, "nodes": [0]}, {"id": 1, "iteration": 0, "nodes": [1]}],
           "structures": [{"id": 0, "first_graph": 0, "last_graph": 1, "count": 2}]}
    assert [p.stem for p in pictures_to_draw(doc)] == ["structure-0-iter0", "structure-0-iter0-graph1"]


@NEEDS_DOT
@pytest.mark.parametrize("fmt, magic", [("png", b"\x89PNG"), ("pdf", b"%PDF"), ("dot", b"digraph")])
def test_run_format(cli, tmp_path, fmt, magic):
    name = script(tmp_path, NONE_GRAD_READ)
    result = cli("run", "--format", fmt, "--out", "out", name)
    assert result.exit_code == 0, stderr_of(result)
    assert f"  structure-0-iter0.{fmt}  structure 0, iteration 0" in result.stdout.splitlines()
    assert (tmp_path / "out" / f"structure-0-iter0.{fmt}").read_bytes().lstrip().startswith(magic)


def test_run_without_dot_writes_sources_and_says_how_to_get_pictures(cli, tmp_path, monkeypatch):
    import importlib

    monkeypatch.setattr(importlib.import_module("gradviz.rendering"), "dot_available", lambda: False)
    name = script(tmp_path, NONE_GRAD_READ)
    result = cli("run", "--out", "out", name)
    assert result.exit_code == 0
    assert "  structure-0-iter0.dot  structure 0, iteration 0" in result.stdout.splitlines()
    assert (tmp_path / "out" / "structure-0-iter0.dot").read_text().startswith("digraph")
    assert stderr_of(result).count("\n") == 1
    assert stderr_of(result).startswith("gradviz: the Graphviz `dot` program is not installed")
    assert "apt-get install graphviz" in stderr_of(result)


def test_run_max_nodes_collapses_large_graphs(cli, tmp_path):
    name = script(tmp_path, IRREGULAR_CHAIN)
    small = cli("run", "--format", "dot", "--out", "small", "--max-nodes", "20", name)
    large = cli("run", "--format", "dot", "--out", "large", name)
    assert small.exit_code == large.exit_code == 0
    small_dot = (tmp_path / "small" / "structure-0-iter0.dot").read_text()
    large_dot = (tmp_path / "large" / "structure-0-iter0.dot").read_text()
    assert small_dot.count("->") < large_dot.count("->")


# ----- run --torch -----------------------------------------------------------------------------------------------
def test_torch_seed_script_unmodified_explains_why_y1_grad_is_none(cli, tmp_path):
    name = script(tmp_path, SEED_TORCH)
    result = cli("run", "--torch", "--no-render", name)
    assert result.stdout.startswith("grad can be implicitly created only for scalar outputs\ny1.grad:  None\n")
    assert result.exit_code == 1  # a nonscalar-backward error, under the default --fail-on error
    # the verdict straight after the script's own output, the diagnostics next, the summary after them
    lines = [line.rstrip() for line in result.stdout.splitlines()]
    assert lines[2:5] == ["gradviz: 3 mistakes found (1 error, 2 warnings), and 1 note (info)", "",
                          f" warning  none-grad           {name}:42"]
    assert lines.index(f" error    nonscalar-backward  {name}:42") < lines.index("Summary")
    doc = json.loads((tmp_path / "gradviz-out" / "script" / "report.json").read_text())
    at_42 = {d["code"]: d for d in doc["diagnostics"] if d["location"]["line"] == 42}
    assert set(at_42) == {"none-grad", "nonscalar-backward"}
    assert at_42["none-grad"]["id"] in at_42["nonscalar-backward"]["links"]
    assert "retain_grad" in at_42["none-grad"]["hint"]
    assert "none-grad" in result.stdout and "nonscalar-backward" in result.stdout
    assert f"{name}:42" in result.stdout
    assert "y1.backward(y1.grad)" in result.stdout
    no_gradviz_traceback(result)


def test_torch_unsupported_name_is_one_line_naming_it(cli, tmp_path):
    name = script(tmp_path, UNSUPPORTED_TORCH)
    result = cli("run", "--torch", "--no-render", name)
    assert result.exit_code == 1
    assert stderr_of(result) == (f"gradviz: error: {name}:4: `torch.fft` is not supported by gradviz's engine; "
                                 "`gradviz supported torch` lists the supported names\n")
    # the report must not read as a clean bill of health: the run stopped there, nothing after it was checked
    assert "nothing suspicious" not in result.stdout
    assert result.stdout.splitlines()[0] == (f"gradviz: no mistakes seen before the run stopped at {name}:4: "
                                             "`torch.fft` is not supported by gradviz's engine; nothing after it "
                                             "was checked")
    doc = json.loads((tmp_path / "gradviz-out" / "script" / "report.json").read_text())
    assert doc["status"]["unsupported"] == "torch.fft"


MISSING_TENSOR_METHOD = """\
import torch

x = torch.ones(3, requires_grad=True)
y = x.sigmod()
"""


def test_torch_missing_tensor_method_is_one_line_with_the_closest_name(cli, tmp_path):
    name = script(tmp_path, MISSING_TENSOR_METHOD)
    result = cli("run", "--torch", "--no-render", name)
    assert result.exit_code == 1
    assert stderr_of(result) == (f"gradviz: error: {name}:4: `Tensor.sigmod` is not supported by gradviz's engine; "
                                 "did you mean `Tensor.sigmoid`? `gradviz supported torch.Tensor` lists the "
                                 "supported names\n")
    assert "Traceback" not in result.stderr
    assert f"gradviz: no mistakes seen before the run stopped at {name}:4: `Tensor.sigmod` is not supported" \
        in result.stdout


def test_cuda_device_is_one_line_and_stops_the_check(cli, tmp_path):
    name = script(tmp_path, "import torch\n\nx = torch.zeros(2, device='cuda')\n")
    result = cli("run", "--torch", "--no-render", name)
    assert result.exit_code == 1
    assert stderr_of(result) == (f"gradviz: error: {name}:3: Torch not compiled with CUDA enabled: gradviz's "
                                 "engine runs on the CPU only (device `cuda`)\n")
    assert f"gradviz: no mistakes seen before the run stopped at {name}:3: `device('cuda')` is not supported" \
        in result.stdout


def test_supported_lists_names_by_prefix(cli):
    result = cli("supported", "torch.cuda.is_")
    assert (result.exit_code, result.stdout) == (0, "torch.cuda.is_available\ntorch.cuda.is_initialized\n")
    assert cli("supported", "cuda.is_").stdout == result.stdout  # `torch.` may be left out
    every = cli("supported").stdout.splitlines()
    assert "torch.sin" in every and "torch.Tensor.backward" in every and "torch.trace" in every  # the matrix trace
    assert "torch.load_trace" not in every and "torch.explain" not in every
    assert len(every) == len(set(every))


def test_supported_with_an_unknown_prefix_says_so(cli):
    result = cli("supported", "torch.fft")
    assert (result.exit_code, result.stdout) == (1, "")
    assert stderr_of(result) == ("gradviz: error: no supported PyTorch name starts with `torch.fft`; "
                                 "`gradviz supported` lists them all\n")


def test_without_torch_flag_import_torch_is_the_real_one_or_missing(cli, tmp_path):
    name = script(tmp_path, "try:\n    import torch\n    print(torch.__name__, hasattr(torch, 'fft'))\n"
                            "except ImportError:\n    print('torch', True)\n")
    result = cli("run", "--no-render", name)
    assert result.stdout.splitlines()[0] == "torch True"


# ----- graph -------------------------------------------------------------------------------------------------
def test_graph_of_a_script_to_a_dot_file(cli, tmp_path):
    name = script(tmp_path, NONE_GRAD_READ)
    result = cli("graph", name, "-o", "g.dot")
    assert (result.exit_code, result.stdout, stderr_of(result)) == (0, "y.grad is None\nWrote g.dot\n", "")
    assert (tmp_path / "g.dot").read_text().startswith("digraph")


@NEEDS_DOT
def test_graph_default_path_and_format(cli, tmp_path):
    name = script(tmp_path, NONE_GRAD_READ)
    result = cli("graph", name)
    assert result.exit_code == 0
    assert result.stdout.splitlines()[-1] == f"Wrote {os.path.join('gradviz-out', 'script', 'graph.svg')}"
    assert "<svg" in (tmp_path / "gradviz-out" / "script" / "graph.svg").read_text()


@NEEDS_DOT
@pytest.mark.parametrize("out, fmt, magic", [("g.png", None, b"\x89PNG"), ("g.pdf", None, b"%PDF"),
                                             ("g.out", "png", b"\x89PNG"), ("g.svg", "dot", b"digraph")])
def test_graph_format_from_suffix_or_option(cli, tmp_path, out, fmt, magic):
    name = script(tmp_path, NONE_GRAD_READ)
    args = ["graph", name, "-o", out] + (["--format", fmt] if fmt else [])
    result = cli(*args)
    assert result.exit_code == 0, stderr_of(result)
    assert (tmp_path / out).read_bytes().lstrip().startswith(magic)


def test_graph_of_a_saved_trace(cli, tmp_path):
    name = script(tmp_path, CLEAN)
    assert cli("run", "--no-render", "--out", "r", name).exit_code == 0
    result = cli("graph", "r/report.json", "-o", "from_json.dot")
    assert (result.exit_code, result.stdout) == (0, "Wrote from_json.dot\n")
    assert cli("graph", name, "-o", "from_script.dot").exit_code == 0
    assert (tmp_path / "from_json.dot").read_text() == (tmp_path / "from_script.dot").read_text()


def test_graph_invalid_trace_names_the_first_bad_field(cli, tmp_path):
    (tmp_path / "bad.json").write_text(json.dumps({"format": "gradviz-trace", "version": 99}))
    result = cli("graph", "bad.json")
    assert result.exit_code == 1
    assert stderr_of(result).startswith("gradviz: error: invalid trace `bad.json`: ")
    assert "version" in stderr_of(result)
    assert stderr_of(result).count("\n") == 1
    no_gradviz_traceback(result)


def test_graph_not_json_at_all(cli, tmp_path):
    (tmp_path / "bad.json").write_text("{not json")
    result = cli("graph", "bad.json")
    assert result.exit_code == 1
    assert stderr_of(result).startswith("gradviz: error: invalid trace `bad.json`: ")
    assert stderr_of(result).count("\n") == 1


def test_graph_missing_trace(cli):
    result = cli("graph", "nope.json")
    assert (result.exit_code, stderr_of(result)) == (1, "gradviz: error: no such trace file `nope.json`\n")


def test_graph_missing_script(cli):
    result = cli("graph", "nope.py")
    assert (result.exit_code, stderr_of(result)) == (1, "gradviz: error: no such script `nope.py`\n")


def test_graph_script_raising_still_draws(cli, tmp_path):
    name = script(tmp_path, RAISES)
    result = cli("graph", name, "-o", "g.dot")
    assert result.exit_code == 1
    assert result.stdout == "Wrote g.dot\n"
    assert stderr_of(result).startswith("Traceback (most recent call last):\n")
    assert "gradviz/" not in stderr_of(result)
    assert (tmp_path / "g.dot").read_text().startswith("digraph")


TWO_ITERATIONS = """\
import gradviz
import gradviz.nn as nn

model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
x = gradviz.randn(5, 3)
for step in range(2):
    model.zero_grad()
    loss = model(x).pow(2).mean()
    loss.backward()
"""


@pytest.mark.parametrize("option, present, absent", [
    (["--show-saved"], ["shape=cylinder", "saved input x", "(5, 3) · 60 B · version 0"], []),
    (["--show-grads"], ['label="0.'], []),
    (["--forward"], ["rankdir=TB", "<B>Addmm</B>", "forward data flow"], ["MeanBackward", "rankdir=BT"]),
    # the module becomes one box: path and class, op and parameter counts, input shape
    (["--depth", "0"], ["box3d", "3 ops · 4 parameters (21 values)", "out (5, 1)"],
     ["AddmmBackward"]),
])
def test_graph_drawing_options_change_the_picture(cli, tmp_path, option, present, absent):
    name = script(tmp_path, TWO_ITERATIONS)
    assert cli("graph", name, "-o", "plain.dot").exit_code == 0
    result = cli("graph", name, "-o", "option.dot", *option)
    assert (result.exit_code, result.stdout) == (0, "Wrote option.dot\n"), stderr_of(result)
    dot, plain = (tmp_path / "option.dot").read_text(), (tmp_path / "plain.dot").read_text()
    for text in present:
        assert text in dot and text not in plain, text
    for text in absent:
        assert text not in dot and text in plain, text


def test_graph_iteration(cli, tmp_path):
    name = script(tmp_path, TWO_ITERATIONS)
    assert cli("graph", name, "-o", "it0.dot", "--iteration", "0").stdout == "Wrote it0.dot\n"
    assert cli("graph", name, "-o", "it1.dot", "--iteration", "1").exit_code == 0
    assert "backward graph · iteration 0 ·" in (tmp_path / "it0.dot").read_text()
    assert "backward graph · iteration 1 ·" in (tmp_path / "it1.dot").read_text()


def test_graph_iteration_beyond_the_trace_is_one_line(cli, tmp_path):
    name = script(tmp_path, TWO_ITERATIONS)
    result = cli("graph", name, "-o", "x.dot", "--iteration", "7")
    assert result.exit_code == 1
    assert stderr_of(result).startswith("gradviz: error: ")
    assert "7" in stderr_of(result) and stderr_of(result).count("\n") == 1
    no_gradviz_traceback(result)


def test_graph_open_calls_the_platform_opener(cli, tmp_path, monkeypatch):
    graph_module = importlib.import_module("gradviz.cli.graph")

    calls = []
    monkeypatch.setattr(graph_module.subprocess, "Popen", lambda cmd, **kw: calls.append(cmd))
    name = script(tmp_path, NONE_GRAD_READ)
    result = cli("graph", name, "-o", "g.dot", "--open")
    assert result.exit_code == 0
    assert calls == [graph_module.opener_command("g.dot")]


def test_opener_per_platform():
    from gradviz.cli.graph import opener_command

    assert opener_command("a.svg", "linux") == ["xdg-open", "a.svg"]
    assert opener_command("a.svg", "darwin") == ["open", "a.svg"]
    assert opener_command("a.svg", "win32") == ["cmd", "/c", "start", "", "a.svg"]


def test_graph_torch(cli, tmp_path):
    name = script(tmp_path, SEED_TORCH)
    result = cli("graph", "--torch", name, "-o", "seed.dot")
    assert result.exit_code == 0, stderr_of(result)
    assert "MseLossBackward" in (tmp_path / "seed.dot").read_text()


def test_graph_max_nodes(cli, tmp_path):
    name = script(tmp_path, IRREGULAR_CHAIN)
    assert cli("graph", name, "-o", "small.dot", "--max-nodes", "20").exit_code == 0
    assert cli("graph", name, "-o", "large.dot").exit_code == 0
    assert (tmp_path / "small.dot").read_text().count("->") < (tmp_path / "large.dot").read_text().count("->")


# ----- explain -----------------------------------------------------------------------------------------------
def test_explain_a_code(cli):
    from gradviz.diagnose import explain

    result = cli("explain", "none-grad")
    assert result.exit_code == 0
    assert result.stdout == explain("none-grad").rstrip("\n") + "\n"
    assert result.stdout.startswith("none-grad (warning): ")


def test_explain_lists_the_codes(cli):
    from gradviz.diagnose import CODES

    result = cli("explain")
    assert result.exit_code == 0
    rows = [line.split() for line in result.stdout.splitlines()[1:] if line.strip()][:len(CODES)]
    assert [(r[0], r[1]) for r in rows] == [(code, severity) for code, (severity, _) in CODES.items()]
    assert result.stdout.splitlines()[-1] == (
        "Run `gradviz explain CODE` for what a code means, a minimal example and the fix.")


def test_explain_unknown_code(cli):
    from gradviz.diagnose import CODES

    result = cli("explain", "no-such-code")
    assert result.exit_code == 1
    assert stderr_of(result) == f"gradviz: error: unknown diagnostic code `no-such-code`; codes: {', '.join(CODES)}\n"


# ----- the installed executable ---------------------------------------------------------------------------------
def installed_gradviz():
    candidate = os.path.join(os.path.dirname(sys.executable), "gradviz")
    return candidate if os.path.exists(candidate) else shutil.which("gradviz")


@pytest.mark.skipif(installed_gradviz() is None, reason="the gradviz executable is not installed")
def test_installed_executable_runs_a_raising_script(tmp_path):
    (tmp_path / "boom.py").write_text(textwrap.dedent(RAISES))
    proc = subprocess.run([installed_gradviz(), "run", "--no-render", "boom.py"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "250"})
    assert proc.returncode == 1
    assert proc.stderr == (
        "Traceback (most recent call last):\n"
        '  File "boom.py", line 8, in <module>\n'
        "    y.backward()\n"
        "gradviz.errors.NonScalarBackwardError: grad can be implicitly created only for scalar outputs\n")
    assert "nonscalar-backward" in proc.stdout
    assert proc.stdout.endswith(
        "Wrote 2 files to gradviz-out/boom/\n  report.json\n  report.html\n")


@pytest.mark.skipif(installed_gradviz() is None, reason="the gradviz executable is not installed")
def test_installed_executable_bad_input_is_one_line(tmp_path):
    proc = subprocess.run([installed_gradviz(), "run", "missing.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert (proc.returncode, proc.stdout, proc.stderr) == (1, "", "gradviz: error: no such script `missing.py`\n")


def test_getting_started_walkthrough_says_what_happens(cli, tmp_path):
    # docs/getting-started.md quotes this run's diagnostics and lines: keep the page true
    from pathlib import Path

    page = (Path(__file__).resolve().parent.parent / "docs" / "getting-started.md").read_text()
    code = page.split("```python\n", 1)[1].split("```")[0]
    (tmp_path / "chained.py").write_text(code)
    result = cli("run", "--torch", "--no-render", "chained.py")
    assert result.exit_code == 1
    doc = json.loads((tmp_path / "gradviz-out" / "chained" / "report.json").read_text())
    found = sorted((d["location"]["line"], d["code"], d["severity"]) for d in doc["diagnostics"])
    assert found == [(14, "retained-graph", "info"), (15, "none-grad", "warning"),
                     (15, "nonscalar-backward", "error")]
    assert "at line 15 raised" in page and "`retained-graph` (info) at line 14" in page
    # the verdict it quotes is this run's first line
    verdict = result.stdout.splitlines()[0]
    assert verdict == "gradviz: 2 mistakes found (1 error, 1 warning), and 1 note (info)"
    assert f"   {verdict}\n" in page


def test_graph_unwritable_output_is_one_line(cli, tmp_path):
    name = script(tmp_path, TWO_ITERATIONS)
    (tmp_path / "a_file").write_text("")
    result = cli("graph", name, "-o", "a_file/sub/g.svg")
    assert (result.exit_code, result.stdout) == (1, "")
    assert stderr_of(result) == "gradviz: error: cannot create output folder `a_file/sub`: Not a directory\n"


def test_saving_a_whole_module_is_one_line_and_stops_the_check(cli, tmp_path):
    name = script(tmp_path, "import torch\n\nmodel = torch.nn.Linear(2, 2)\ntorch.save(model, 'model.pt')\n")
    result = cli("run", "--torch", "--no-render", name)
    assert result.exit_code == 1
    assert stderr_of(result) == (
        f"gradviz: error: {name}:4: gradviz.save stores tensors, numbers, strings and lists/tuples/dicts of them "
        "(what torch.load(weights_only=True) reads), not an object of type gradviz.nn.modules.linear.Linear at obj; "
        "save its state_dict() instead\n")
    assert f"gradviz: no mistakes seen before the run stopped at {name}:4: `torch.save(Linear)` is not supported" \
        in result.stdout
