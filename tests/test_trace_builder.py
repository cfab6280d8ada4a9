"""The engine-neutral TraceBuilder fed with synthetic facts (no engine at all), and the observer events the
gradviz adapter relies on instead of stack inspection (on_parameter_update, quiet)."""

import ast
from pathlib import Path

import pytest

import gradviz
import gradviz.nn as nn
import gradviz.optim as optim
from gradviz.autograd import observer
from gradviz.tracing import validate
from gradviz.tracing.builder import LEAF, OutputFact, SavedFact, TraceBuilder
from gradviz.tracing.frames import Location

TRACING = Path(gradviz.__file__).parent / "tracing"
LOC_FWD = Location("train.py", 10, "<module>", "y = w * x")
LOC_SUM = Location("train.py", 11, "<module>", "loss = y.sum()")
LOC_INPLACE = Location("train.py", 12, "<module>", "x.add_(1)")
LOC_BACKWARD = Location("train.py", 13, "<module>", "loss.backward()")


def _out(key, shape=(3,), nbytes=12):
    return OutputFact(key, shape, "float32", nbytes, True, False, None, None, None)


def _toy_graph(builder):
    """w (a parameter) * x (saved) -> y, summed: two nodes, x's 12 bytes retained."""
    builder.engine("toy", "1.0", ("cpu",))
    builder.variable("w", "parameter", (3,), "float32", 12, True, None, name="model.w", is_parameter=True)
    builder.variable("x", "new", (3,), "float32", 12, False, LOC_FWD)
    builder.module_enter("m", "model", "Toy")
    builder.op("n1", "MulBackward0", "Mul", False, [("w", LEAF), None], ["w", "x"], [_out("y")],
               [SavedFact("x", "input", 1, (3,), 12, 0, "vc-x", "block-x", 12, None)], LOC_FWD)
    builder.module_exit("m")
    builder.op("n2", "SumBackward0", "Sum", False, [("n1", 0)], ["y"], [_out("loss", (), 4)], [], LOC_SUM)


def test_builder_builds_a_valid_document_from_facts_alone():
    b = TraceBuilder()
    _toy_graph(b)
    assert b.stats["retained_bytes"] == 12
    b.backward_begin(["loss"], ["n2"], LOC_BACKWARD, retain_graph=None)
    b.backward_step("n2", 1.0)
    b.backward_step("n1", 1.7320508)
    b.accumulate("w", 2.5)
    b.buffers_freed("n1")
    b.buffers_freed("n2")
    b.backward_end(None)
    assert b.stats["retained_bytes"] == 0
    b.stop()
    doc = b.document(with_diagnostics=False)
    validate(doc)
    assert doc["engine"] == {"name": "toy", "version": "1.0", "devices": ["cpu"]}
    assert doc["modules"] == {"model": "Toy"}
    ops = {n["op"]: n for n in doc["nodes"]}
    assert set(ops) == {"MulBackward0", "SumBackward0", "AccumulateGrad"}  # the engine's names, kept
    mul, total, acc = ops["MulBackward0"], ops["SumBackward0"], ops["AccumulateGrad"]
    assert mul["inputs"] == [[acc["id"], 0], [None, 0]] and total["inputs"] == [[mul["id"], 0]]
    assert mul["module"] == ["model"] and total["module"] == []
    assert mul["saved"] == [{"variable": 1, "kind": "input", "index": 1, "shape": [3], "bytes": 12, "version": 0}]
    assert mul["location"]["text"] == "y = w * x" and mul["freed_by"] == 0
    variables = {v["name"] or v["id"]: v for v in doc["variables"]}
    assert variables["model.w"]["is_parameter"] and acc["variable"] == variables["model.w"]["id"]
    (bw,) = doc["backwards"]
    assert bw["visited"] == [total["id"], mul["id"], acc["id"]]
    assert bw["leaf_grad_norms"] == {str(variables["model.w"]["id"]): 2.5}
    assert doc["memory"]["peak_retained_bytes"] == 12 and doc["memory"]["final_retained_bytes"] == 0


def test_an_inplace_fact_on_saved_storage_predicts_the_stale_version_and_the_error_gets_its_code():
    b = TraceBuilder()
    _toy_graph(b)
    b.inplace("x", 0, 1, "vc-x", LOC_INPLACE, op="AddBackward0")
    b.inplace("x", 1, 2, "vc-unrelated", LOC_INPLACE, op="AddBackward0")  # another storage: nobody saved it
    b.backward_begin(["loss"], ["n2"], LOC_BACKWARD, retain_graph=None)
    b.backward_step("n2", 1.0)
    b.backward_end({"type": "StaleVersionError", "message": "one of the variables needed for gradient "
                    "computation has been modified by an inplace operation", "node": "n1"})
    doc = b.document(with_diagnostics=True)
    mul = next(n for n in doc["nodes"] if n["op"] == "MulBackward0")
    first, second = [e for e in doc["events"] if e["kind"] == "inplace"]
    assert first["saved_by"] == [mul["id"]] and first["location"]["line"] == 12
    assert second["saved_by"] == []
    assert doc["backwards"][0]["error"]["code"] == "stale-version"
    assert doc["backwards"][0]["error"]["node"] == mul["id"]
    assert "stale-version" in {d["code"] for d in doc["diagnostics"]}


def test_freed_and_dead_nodes_are_not_reported_stale():
    b = TraceBuilder()
    _toy_graph(b)
    b.buffers_freed("n1")
    b.inplace("x", 0, 1, "vc-x", LOC_INPLACE)
    b.node_died("n1")
    b.node_died("n2")
    b.parameter_update("x", 1, 2, "vc-x", LOC_INPLACE, "SGD")  # no live saver left: no event at all
    doc = b.document(with_diagnostics=False)
    assert [e["saved_by"] for e in doc["events"] if e["kind"] == "inplace"] == [[]]
    assert b.stats["retained_bytes"] == 0
    assert [g["alive_at_end"] for g in doc["graphs"]] == [False]


def test_death_facts_free_keys_for_reuse_and_leave_the_records():
    b = TraceBuilder()
    b.variable(7, "new", (2,), "float64", 16, False, None)
    b.variable_died(7)
    b.variable(7, "factory", (5,), "float32", 20, False, None)  # the key names a new object now
    doc = b.document(with_diagnostics=False)
    assert [(v["id"], v["origin"], v["shape"]) for v in doc["variables"]] == [(0, "new", [2]), (1, "factory", [5])]
    b.variable_state(7, requires_grad=True)
    assert b.document(with_diagnostics=False)["variables"][1]["requires_grad_final"] is True
    assert b.document(with_diagnostics=False)["variables"][0]["requires_grad_final"] is None


def test_optimizer_fact_ends_the_iteration_and_grad_reads_are_events():
    b = TraceBuilder()
    _toy_graph(b)
    b.grad_read("loss", LOC_SUM, was_none=True, is_leaf=False, retains_grad=False, requires_grad=True, name="loss")
    b.optimizer("step", LOC_BACKWARD, "SGD", ["w"])
    b.op("n3", "MulBackward0", "Mul", False, [("w", LEAF), None], ["w", "x"], [_out("y2")], [], LOC_FWD)
    doc = b.document(with_diagnostics=False)
    read, step = doc["events"]
    assert read["kind"] == "grad_read" and read["was_none"] and read["seq"] < step["seq"]
    assert step["optimizer"] == "SGD" and step["parameters"] == [0]
    assert doc["iterations"] == 2
    assert [v["name"] for v in doc["variables"] if v["name"]] == ["model.w", "loss"]


def test_builder_modules_import_no_engine():
    """The builder side of the seam (and what it imports) reads facts only: no gradviz engine, no torch."""
    engine = ("autograd", "ops", "nn", "optim", "functions", "factories", "torch")
    for name in ("builder.py", "grouping.py", "records.py", "document.py", "frames.py"):
        tree = ast.parse((TRACING / name).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                parts = (node.module or "").split(".")
                assert not any(p in engine for p in parts), f"{name} imports {node.module}"
            elif isinstance(node, ast.Import):
                assert not any(a.name.split(".")[0] == "torch" for a in node.names), name


def test_no_tracing_code_inspects_frames_to_recognise_gradviz_internals():
    for path in TRACING.rglob("*.py"):
        text = path.read_text()
        assert "co_qualname" not in text and "bump_version" not in text, path.name
        assert "_caller_is_internal" not in text, path.name


# ----- the observer events behind the adapter ----------------------------------------------------------------------
class Updates(observer.Observer):
    def __init__(self):
        self.updates = []
        self.reads = []

    def on_parameter_update(self, optimizer, parameter, old_version, new_version):
        self.updates.append((optimizer, parameter, old_version, new_version))

    def on_grad_read(self, variable, grad):
        self.reads.append((variable, observer.is_quiet()))


def _model_and_loss():
    gradviz.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    loss = model(gradviz.randn(5, 3)).pow(2).mean()
    return model, loss


@pytest.mark.parametrize("make", [lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9),
                                  lambda ps: optim.Adam(ps, lr=0.01)])
def test_an_optimizer_step_reports_each_updated_parameter_once(make):
    model, loss = _model_and_loss()
    params = list(model.parameters())
    opt = make(params)
    loss.backward()
    seen = Updates()
    versions = [p._version for p in params]
    with observer.observing(seen):
        opt.step()
    assert [u[1] for u in seen.updates] == params  # each once, in the optimizer's order
    assert all(u[0] is opt for u in seen.updates)
    assert [(u[2], u[3]) for u in seen.updates] == [(v, v + 1) for v in versions]
    assert not observer.is_quiet()  # the quiet block ended with the step


def test_parameter_updates_reach_the_trace_only_when_a_live_graph_saved_the_parameter():
    model, loss = _model_and_loss()
    opt = optim.SGD(model.parameters(), lr=0.1)
    with gradviz.trace() as tr:
        loss = model(gradviz.randn(5, 3)).pow(2).mean()
        loss.backward(retain_graph=True)
        opt.step()  # step-one: the retained graph saved these weights
        del loss  # that graph goes
        loss2 = model(gradviz.randn(5, 3)).pow(2).mean()
        loss2.backward()
        opt.step()  # step-two: nothing alive saved the old values
    inplace = [e for e in tr.to_dict()["events"] if e["kind"] == "inplace"]
    # only the second layer's weight was saved (for its input's gradient; the first layer's input needs none)
    assert [e["variable"] for e in inplace] == [tr.variable_id(model[2].weight)]
    assert all(e["op"] == "SGD.step" and e["saved_by"] for e in inplace)
    assert {e["location"]["line"] for e in inplace} == {_line_of("# step-one")}


def _line_of(marker):
    (line,) = [i + 1 for i, text in enumerate(Path(__file__).read_text().splitlines())
               if marker in text and "_line_of" not in text]
    return line


def test_internal_grad_reads_are_quiet_and_not_user_reads_without_frame_inspection():
    w = gradviz.randn(3, requires_grad=True)
    (w * 2).sum().backward()
    seen = Updates()
    with observer.observing(seen):
        w.grad  # noqa: B018 - the user's read
        with observer.quiet():
            w.grad  # noqa: B018 - gradviz's own read
    assert [q for _, q in seen.reads] == [False, True]
    with gradviz.trace() as tr:
        w.grad  # noqa: B018
        with observer.quiet():
            w.grad  # noqa: B018
            w.grad = None
            w.detach()
    events = tr.to_dict()["events"]
    assert [e["kind"] for e in events] == ["grad_read"]


def test_gradcheck_inside_a_trace_leaves_no_user_cuts_or_reads():
    x = gradviz.randn(3, dtype=gradviz.float64, requires_grad=True)
    with gradviz.trace() as tr:
        assert gradviz.autograd.gradcheck(lambda a: (a * a).sum(), (x,))
    kinds = {e["kind"] for e in tr.to_dict()["events"]}
    assert "detach" not in kinds and "grad_read" not in kinds


def test_zero_grad_inside_a_trace_is_an_optimizer_event_not_grad_writes():
    model, loss = _model_and_loss()
    opt = optim.SGD(model.parameters(), lr=0.1)
    loss.backward()
    with gradviz.trace() as tr:
        opt.zero_grad()
        model.zero_grad()
    events = tr.to_dict()["events"]
    assert [(e["kind"], e["optimizer"], e["event"]) for e in events] == [
        ("optimizer", "SGD", "zero_grad"), ("optimizer", "Sequential", "zero_grad")]


def test_engine_choice():
    with gradviz.trace(engine="gradviz") as tr:
        (gradviz.randn(2, requires_grad=True) * 2).sum().backward()
    doc = tr.to_dict()
    assert doc["engine"] == {"name": "gradviz", "version": gradviz.__version__, "devices": ["cpu"]}
    assert gradviz.trace(engine="auto").to_dict()["engine"]["name"] == "gradviz"
    with pytest.raises(ValueError, match=r"^engine must be one of 'auto', 'gradviz', 'torch', got 'jax'$"):
        gradviz.trace(engine="jax")


def test_documents_without_an_engine_section_still_load(tmp_path):
    with gradviz.trace() as tr:
        (gradviz.randn(2, requires_grad=True) * 2).sum().backward()
    doc = dict(tr.to_dict())
    del doc["engine"]
    path = tmp_path / "old.json"
    gradviz.tracing.document.write_json(doc, path)
    assert "engine" not in gradviz.load_trace(path)
    doc["engine"] = {"name": 3}
    with pytest.raises(gradviz.tracing.TraceFormatError, match=r"^engine\.name: expected a string$"):
        validate(doc)


def test_unmeasured_norms_leave_no_entries_and_the_document_stays_valid():
    """An adapter that cannot read a gradient without a host sync reports norm None."""
    b = TraceBuilder()
    _toy_graph(b)
    b.backward_begin(["loss"], ["n2"], LOC_BACKWARD, retain_graph=None)
    b.backward_step("n2", None)
    b.backward_step("n1", None)
    b.accumulate("w", None)
    b.backward_end(None)
    doc = b.document(with_diagnostics=True)
    validate(doc)
    (bw,) = doc["backwards"]
    assert bw["grad_norms"] == {} and bw["leaf_grad_norms"] == {} and len(bw["visited"]) == 3


def test_auto_engine_takes_registered_adapters_only_when_they_apply(monkeypatch):
    from gradviz.tracing import adapters

    monkeypatch.setattr(adapters, "_REGISTRY", dict(adapters._REGISTRY))
    monkeypatch.setattr(adapters, "_AUTO", [])
    present = []
    adapters.register("torch", "no.such.module:Adapter", auto_when=lambda: bool(present))
    assert adapters.engine_names("auto") == ["gradviz"]
    present.append(True)
    assert adapters.engine_names("auto") == ["gradviz", "torch"]
    assert adapters.engine_names("torch") == ["torch"]
    monkeypatch.setattr(adapters, "_REGISTRY", {"gradviz": adapters._REGISTRY["gradviz"]})
    with pytest.raises(ValueError, match=r"^engine='torch' is not available in this version of gradviz$"):
        gradviz.trace(engine="torch")


def test_saved_tensors_charge_each_block_once_and_a_released_node_holds_nothing():
    """One saved tensor, several (two on one block, one on the model's memory), plain 10-tuples, and a node
    whose buffers backward already released (``node_saved(..., freed=True)``): what the document and the
    memory book see."""
    b = TraceBuilder()
    b.variable("x", "new", (3,), "float32", 12, False, LOC_FWD)
    b.variable("v", "new", (3,), "float32", 12, False, LOC_FWD)
    b.op("n1", "ExpBackward0", "Exp", False, [None], ["x"], [_out("y")],
         [SavedFact(None, "output", 0, (3,), 12, 0, "vc-y", "blk-y", 12, None, "mem-y")], LOC_FWD)
    assert b.stats["retained_bytes"] == 12
    b.op("n2", "MulBackward0", "Mul", False, [("n1", 0), None], ["y", "v"], [_out("z")],
         [SavedFact("y", "input", 0, (3,), 12, 0, "vc-y", "blk-y", 12, None, "mem-y"),
          SavedFact("v", "input", 1, (3,), 12, 0, "vc-v", "blk-v", 12, None, "mem-v"),
          SavedFact("x", "input", 2, (3,), 12, 0, "vc-x", None, None, None, "mem-x")], LOC_FWD)
    assert b.stats["retained_bytes"] == 24  # blk-y counted once for both nodes, x's memory not charged
    b.op("n3", "NegBackward0", "Neg", False, [("n2", 0)], ["z"], [_out("w")],
         [("z", "input", 0, (3,), 12, 0, "vc-z", "blk-z", 12, None)], LOC_FWD)  # a 10-tuple: no storage
    assert b.stats["retained_bytes"] == 36
    assert set(b.saved_counters) == {"vc-y", "vc-v", "vc-x", "vc-z"}
    assert set(b.saved_storages) == {"mem-y", "mem-v", "mem-x"}
    b.node_saved("n3", [("z", "input", 0, (3,), 12, 3, "vc-z", "blk-z", 12, None, "mem-z")], freed=True)
    assert b.stats["retained_bytes"] == 24 and "mem-z" not in b.saved_storages
    assert list(b.saved_counters["vc-z"]) == [b.live_nodes["n3"].id]  # still described, not held
    b.buffers_freed("n2")
    assert b.stats["retained_bytes"] == 12 and set(b.saved_storages) == {"mem-y"}
    b.node_died("n1")
    assert b.stats["retained_bytes"] == 0 and b.saved_storages == {}
    doc = b.document(with_diagnostics=False)
    validate(doc)
    saved = {n["op"]: n["saved"] for n in doc["nodes"]}
    ids = {v["id"] for v in doc["variables"]}
    assert [s["index"] for s in saved["MulBackward0"]] == [0, 1, 2]
    assert all(s["variable"] in ids for s in saved["MulBackward0"])
    assert saved["NegBackward0"] == [{"variable": saved["NegBackward0"][0]["variable"], "kind": "input",
                                      "index": 0, "shape": [3], "bytes": 12, "version": 3}]
    assert doc["memory"]["peak_retained_bytes"] == 36


@pytest.mark.parametrize("enabled", [True, False])
def test_building_a_document_leaves_the_collector_as_it_found_it(enabled):
    import gc

    b = TraceBuilder()
    _toy_graph(b)
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        b.document(with_diagnostics=True)
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


# ----- the builder's shape: named facts, collaborators ------------------------------------------------------------
def _facts_of(monkeypatch, engine, run):
    """The outputs and saved tensors the ``engine`` adapter hands ``TraceBuilder.op`` while ``run()`` traces."""
    seen = []
    original = TraceBuilder.op

    def op(self, key, op_name, class_name, custom, edges, input_variables, outputs, saved, *args, **kwargs):
        seen.append((op_name, list(outputs), list(saved)))
        return original(self, key, op_name, class_name, custom, edges, input_variables, outputs, saved, *args,
                        **kwargs)

    monkeypatch.setattr(TraceBuilder, "op", op)
    with gradviz.trace(engine=engine):
        run()
    return seen


def test_the_gradviz_adapter_hands_the_builder_named_facts(monkeypatch):
    x = gradviz.tensor([1.0, 2.0, 3.0], requires_grad=True)
    seen = _facts_of(monkeypatch, "gradviz", lambda: (x * x).sum())
    name, outputs, saved = next(s for s in seen if s[0] == "MulBackward")
    assert [type(o) for o in outputs] == [OutputFact] and [type(s) for s in saved] == [SavedFact, SavedFact]
    assert (outputs[0].shape, outputs[0].dtype, outputs[0].nbytes, outputs[0].is_leaf) == ((3,), "float32", 12, False)
    assert [(s.kind, s.shape, s.nbytes) for s in saved] == [("input", (3,), 12), ("input", (3,), 12)]
    assert saved[0].storage == saved[1].storage is not None  # x * x: both saved values are x's memory


def test_the_torch_adapter_hands_the_builder_named_facts(monkeypatch):
    torch = pytest.importorskip("torch")
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    seen = _facts_of(monkeypatch, "torch", lambda: x.tanh().sum())
    name, outputs, saved = next(s for s in seen if s[0] == "TanhBackward0")
    assert [type(o) for o in outputs] == [OutputFact] and [type(s) for s in saved] == [SavedFact]
    assert (outputs[0].shape, outputs[0].dtype, outputs[0].requires_grad) == ((3,), "float32", True)
    assert (saved[0].kind, saved[0].shape, saved[0].nbytes, saved[0].device) == ("output", (3,), 12, "cpu")


def test_a_fact_method_is_its_owners_bound_method_unless_replaced_on_the_class(monkeypatch):
    b = TraceBuilder()
    assert b.op.__self__ is b.graph_facts and b.inplace.__self__ is b.versions
    assert b.backward_step.__self__ is b.grads and b.step_ended.__self__ is b.iterations
    monkeypatch.setattr(TraceBuilder, "op", lambda self, *a, **k: "patched")
    assert TraceBuilder().op("k") == "patched"  # a test's or a subclass's replacement is honoured
