"""Light iterations (tracing/schedule.py): full records where they matter, a light watch elsewhere. A mistake that
first appears at iteration 500 of a light run is still named; `trace_steps` records exactly the iterations asked
for; a new structure late in the run gets a full trace; light iterations really run without the per-op machinery.
Each loop runs on both engines."""

import json
import textwrap

import pytest
from click.testing import CliRunner

import gradviz
from gradviz.cli import main
from gradviz.document import TraceFormatError, validate

torch = pytest.importorskip("torch")

ENGINES = ["torch", "gradviz"]
STEPS = 600
LATE = 500


def _lib(engine):
    return torch if engine == "torch" else gradviz


def _line(marker):
    """The line of this file that carries ``marker`` in a comment."""
    with open(__file__) as f:
        for number, text in enumerate(f, 1):
            if text.rstrip().endswith(f"# {marker}"):
                return number
    raise AssertionError(marker)


def _model(lib):
    lib.manual_seed(0)
    nn = lib.nn
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    return model, lib.optim.SGD(model.parameters(), lr=0.01), lib.randn(16, 4), lib.randn(16, 1)


def _nan_late(engine, **schedule):
    """From iteration LATE on, log of negative values: the loss is NaN there."""
    lib = _lib(engine)
    model, opt, x, y = _model(lib)
    with gradviz.trace(engine=engine, **schedule) as tr:
        for step in range(STEPS):
            opt.zero_grad()
            out = model(x)
            if step == LATE:
                out = out.log()  # nan-op
            loss = ((out - y) ** 2).mean()
            loss.backward()  # nan-backward
            opt.step()
    return tr.to_dict()


def _total_loss_late(engine):
    """`total_loss += loss` from iteration LATE on: every later graph stays alive."""
    lib = _lib(engine)
    model, opt, x, y = _model(lib)
    total_loss = 0
    with gradviz.trace(engine=engine, light=True) as tr:
        for step in range(STEPS):
            opt.zero_grad()
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
            opt.step()
            if step >= LATE:
                total_loss += loss  # keeper
        doc = tr.to_dict()
    return doc


@pytest.mark.parametrize("engine", ENGINES)
def test_a_nan_first_at_iteration_500_of_a_light_run_is_named_with_its_iteration_and_the_rerun(engine):
    doc = _nan_late(engine, light=True)
    validate(doc)
    assert doc["iterations"] == STEPS
    light = doc["schedule"]["light"]
    assert light["nonfinite_loss"]["iteration"] == LATE
    assert light["nonfinite_loss"]["location"]["line"] == _line("nan-backward")
    nan = [d for d in doc["diagnostics"] if d["code"] == "nan-inf"]
    assert len(nan) == 1
    # the light watch read the op from what the graph saved, and the one line of the file that calls `log`
    assert nan[0]["message"].startswith(f"LogBackward{'0' if engine == 'torch' else ''} at line {_line('nan-op')} "
                                        f"produced NaN/Inf in its forward output at iteration {LATE}, a light "
                                        f"iteration (the loss was nan at line {_line('nan-backward')})")
    assert nan[0]["location"]["line"] == _line("nan-op")
    assert nan[0]["details"]["trace_steps"] == [LATE, LATE]
    assert nan[0]["details"]["rerun"].startswith(f"gradviz run --trace-steps {LATE}:{LATE} ")
    # from the finding on, full iterations: the NaN parameters' ops are on record
    full = doc["schedule"]["full"]
    assert {"first": LATE + 1, "last": LATE + 3, "why": "nonfinite"} in full


@pytest.mark.parametrize("engine", ENGINES)
def test_the_rerun_with_trace_steps_names_the_op_and_line(engine):
    doc = _nan_late(engine, trace_steps=(LATE, LATE))
    assert doc["schedule"]["full"] == [{"first": LATE, "last": LATE, "why": "asked"}]
    nan = [d for d in doc["diagnostics"] if d["code"] == "nan-inf"]
    assert nan and nan[0]["location"]["line"] == _line("nan-op")
    assert nan[0]["message"].startswith("LogBackward")
    assert doc["first_nonfinite"]["iteration"] == LATE


@pytest.mark.parametrize("engine", ENGINES)
def test_trace_steps_gives_full_records_of_exactly_those_iterations(engine):
    doc = _nan_late(engine, trace_steps=(LATE, LATE + 2))
    assert doc["iterations"] == STEPS
    assert {g["iteration"] for g in doc["graphs"]} == {LATE, LATE + 1, LATE + 2}
    assert sorted(b["iteration"] for b in doc["backwards"]) == [LATE, LATE + 1, LATE + 2]
    assert {e["iteration"] for e in doc["events"]} == {LATE, LATE + 1, LATE + 2}
    assert doc["schedule"]["light_iterations"] == STEPS - 3
    # light iterations still count, in memory.series too
    assert [p["iteration"] for p in doc["memory"]["series"]][:5] == [0, 1, 2, 3, 4]
    assert doc["memory"]["series"][-1]["iteration"] == STEPS - 1


@pytest.mark.parametrize("engine", ENGINES)
def test_graphs_piling_up_from_iteration_500_are_named_retained_graph_at_the_line(engine):
    doc = _total_loss_late(engine)
    growth = doc["schedule"]["light"]["growth"]
    assert growth["iteration"] == LATE
    retained = [d for d in doc["diagnostics"] if d["code"] == "retained-graph"]
    assert len(retained) == 1
    assert retained[0]["location"]["line"] == _line("keeper")
    assert "`total_loss += loss`" in retained[0]["message"]
    assert retained[0]["details"]["growing"] is True
    # graphs alive climb by one a light iteration from there: the points say so
    alive = {p["iteration"]: p["graphs_alive"] for p in doc["memory"]["series"]}
    assert alive[LATE + 40] - alive[LATE + 20] == 20


@pytest.mark.parametrize("engine", ENGINES)
def test_a_new_structure_at_iteration_300_gets_a_full_trace(engine):
    lib = _lib(engine)
    model, opt, x, y = _model(lib)
    wide = lib.nn.Linear(4, 1)
    params = list(model.parameters()) + list(wide.parameters())
    opt = lib.optim.SGD(params, lr=0.01)
    with gradviz.trace(engine=engine, light=True) as tr:
        for step in range(400):
            opt.zero_grad()
            out = model(x) if step < 300 else model(x) + wide(x)  # new structure
            loss = ((out - y) ** 2).mean()
            loss.backward()
            opt.step()
    doc = tr.to_dict()
    assert {"first": 301, "last": 301, "why": "new-structure"} in doc["schedule"]["full"]
    graph = [g for g in doc["graphs"] if g["iteration"] == 301]
    assert len(graph) == 1
    nodes = {n["id"]: n for n in doc["nodes"]}
    lines = {nodes[i]["location"]["line"] for i in graph[0]["nodes"] if nodes[i].get("location")}
    assert _line("new structure") in lines
    assert len({g["structure"] for g in doc["graphs"]}) == 2  # the old structure and the new one
    # only the first three, the samples and the new one are full: the other iterations recorded no graph
    assert sorted({g["iteration"] for g in doc["graphs"]}) == [0, 1, 2, 8, 16, 32, 64, 128, 256, 301]


def test_light_iterations_run_without_the_function_mode_on_torch():
    from torch.overrides import _get_current_function_mode_stack

    model, opt, x, y = _model(torch)
    modes = {}
    with gradviz.trace(engine="torch", light=True) as tr:
        for step in range(20):
            modes[step] = len(_get_current_function_mode_stack())
            opt.zero_grad()
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
            opt.step()
    doc = tr.to_dict()
    assert [s for s, n in modes.items() if n] == [0, 1, 2, 8, 16]  # the mode is on the stack for full ones only
    assert len(_get_current_function_mode_stack()) == 0
    assert torch.autograd.backward.__module__ == "torch.autograd"  # the light wrapper is gone after the trace
    assert doc["iterations"] == 20


def test_light_iterations_run_without_the_per_op_observer_on_gradviz():
    from gradviz.autograd import observer

    model, opt, x, y = _model(gradviz)
    seen = {}
    with gradviz.trace(engine="gradviz", light=True):
        for step in range(20):
            seen[step] = [type(o).__name__ for o in observer.active()]
            opt.zero_grad()
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
            opt.step()
    assert seen[1] == ["Guard"] and seen[8] == ["Guard"]
    assert seen[3] == ["GradvizLight"] and seen[19] == ["GradvizLight"]
    assert observer.active() == ()


@pytest.mark.parametrize("engine", ENGINES)
def test_light_steps_keep_gradient_norms_per_parameter(engine):
    lib = _lib(engine)
    model, opt, x, y = _model(lib)
    with gradviz.trace(engine=engine, light=True) as tr:
        for _ in range(12):
            opt.zero_grad()
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
            last = [float((p.grad * p.grad).sum()) ** 0.5 for p in model.parameters()]
            opt.step()
    norms = tr.to_dict()["schedule"]["light"]["grad_norms"]
    assert [n["parameter"] for n in norms] == ["model.0.weight", "model.0.bias", "model.2.weight", "model.2.bias"]
    assert [n["iteration"] for n in norms] == [11] * 4
    assert [n["last"] for n in norms] == pytest.approx(last, rel=1e-5)


def test_the_default_trace_is_full_and_says_so():
    model, opt, x, y = _model(gradviz)
    with gradviz.trace() as tr:
        for _ in range(10):
            opt.zero_grad()
            ((model(x) - y) ** 2).mean().backward()
            opt.step()
    schedule = tr.to_dict()["schedule"]
    assert schedule == {"mode": "full", "full_steps": 3, "trace_steps": None, "full": [], "light_iterations": 0}


def test_bad_schedule_arguments_raise_one_clear_error():
    with pytest.raises(ValueError, match=r"full_steps must be a whole number >= 0, got -1"):
        gradviz.trace(light=True, full_steps=-1)
    with pytest.raises(ValueError, match=r"trace_steps must be \(first, last\) .* got \(5, 2\)"):
        gradviz.trace(trace_steps=(5, 2))
    with pytest.raises(TypeError, match="light must be True or False, got str 'yes'"):
        gradviz.trace(light="yes")


def test_the_schedule_section_is_validated():
    model, opt, x, y = _model(gradviz)
    with gradviz.trace(light=True) as tr:
        for _ in range(5):
            opt.zero_grad()
            ((model(x) - y) ** 2).mean().backward()
            opt.step()
    doc = tr.to_dict()
    validate(doc)
    doc["schedule"]["full"][0]["first"] = "0"
    with pytest.raises(TraceFormatError, match=r"^schedule\.full\[0\]\.first: expected an integer$"):
        validate(doc)


SCRIPT = textwrap.dedent("""\
    import torch
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(8, 3)
    for step in range(40):
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
    """)


def test_gradviz_run_trace_steps_records_exactly_those_steps(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    done = CliRunner().invoke(main, ["run", "--json-only", "--trace-steps", "20:22", str(script)],
                              catch_exceptions=False)  # (in this process: a fresh one would import torch again)
    assert done.exit_code == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["schedule"]["mode"] == "light"
    assert doc["schedule"]["trace_steps"] == [20, 22]
    assert {g["iteration"] for g in doc["graphs"]} == {20, 21, 22}
    assert doc["iterations"] == 40


def test_gradviz_run_defaults_to_light_and_full_records_everything(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    runner = CliRunner()
    light = json.loads(runner.invoke(main, ["run", "--json-only", str(script)]).output)
    full = json.loads(runner.invoke(main, ["run", "--json-only", "--full", str(script)]).output)
    assert light["schedule"]["full"] == [{"first": 0, "last": 2, "why": "first"},
                                         {"first": 8, "last": 8, "why": "sample"},
                                         {"first": 16, "last": 16, "why": "sample"},
                                         {"first": 32, "last": 32, "why": "sample"}]
    assert light["schedule"]["light_iterations"] == 34
    assert full["schedule"]["mode"] == "full" and full["schedule"]["light_iterations"] == 0
    assert light["iterations"] == full["iterations"] == 40
    five = json.loads(runner.invoke(main, ["run", "--json-only", "--full-steps", "5", str(script)]).output)
    assert five["schedule"]["full"][0] == {"first": 0, "last": 4, "why": "first"}


@pytest.mark.parametrize("args, message", [
    (["--trace-steps", "500"], "gradviz: error: --trace-steps: expected A:B (first and last iteration, e.g. "
                               "500:502), got '500'\n"),
    (["--trace-steps", "9:3"], "gradviz: error: --trace-steps: expected 0 <= A <= B, got '9:3'\n"),
    (["--trace-steps", "a:b"], "gradviz: error: --trace-steps: expected two whole numbers A:B (e.g. 500:502), "
                               "got 'a:b'\n"),
    (["--full", "--trace-steps", "1:2"], "gradviz: error: --trace-steps and --full cannot be used together: --full "
                                         "records every iteration already\n"),
])
def test_bad_schedule_options_are_one_line_errors(tmp_path, args, message):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    result = CliRunner().invoke(main, ["run", *args, str(script)])
    assert (result.exit_code, result.stderr) == (1, message)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_loop_without_optimizer_ends_its_iterations_at_backward(engine):
    """word_language_model's loop: the update by hand, no optimizer; each backward ends an iteration."""
    lib = _lib(engine)
    model, _, x, y = _model(lib)
    with gradviz.trace(engine=engine, light=True) as tr:
        for _ in range(40):
            model.zero_grad()
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
            with lib.no_grad():
                for p in model.parameters():
                    p -= 0.01 * p.grad
    doc = tr.to_dict()
    assert doc["iterations"] == 40
    assert [(r["first"], r["last"]) for r in doc["schedule"]["full"]] == [(0, 2), (8, 8), (16, 16), (32, 32)]
    assert sorted({g["iteration"] for g in doc["graphs"]}) == [0, 1, 2, 8, 16, 32]
    assert doc["internal_errors"] == []
