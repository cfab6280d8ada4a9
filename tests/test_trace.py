"""The tracer records what happened, where in the user's code, under which module — and keeps nothing alive."""

import gc
import sys
import weakref

import numpy as np
import pytest

import gradviz
import gradviz.nn as nn
from gradviz.tracing import snapshot


def here():
    """The caller's line number: put it on the same line as the statement under test."""
    return sys._getframe(1).f_lineno


def var_named(doc, name):
    found = [v for v in doc["variables"] if v["name"] == name]
    assert found, f"no variable named {name!r}: {[v['name'] for v in doc['variables']]}"
    return found[-1]


def node(doc, nid):
    return next(n for n in doc["nodes"] if n["id"] == nid)


def test_callable_and_subpackage_both_import():
    from gradviz.tracing import load_trace, trace

    assert gradviz.trace is trace and gradviz.load_trace is load_trace
    assert callable(gradviz.trace) and isinstance(gradviz.trace(), gradviz.tracing.Trace)


def test_op_fields_and_exact_user_locations():
    x = gradviz.tensor([[1.0, 2.0, 3.0]], requires_grad=True)
    with gradviz.trace() as tr:
        y = x * 2; line_y = here()  # noqa: E702
        z = y.sum(); line_z = here()  # noqa: E702, F841 - named through the frame
    doc = tr.to_dict()
    vy, vz = var_named(doc, "y"), var_named(doc, "z")
    assert vy["location"] == {"file": __file__, "line": line_y, "text": "y = x * 2; line_y = here()  # noqa: E702",
                              "function": "test_op_fields_and_exact_user_locations"}
    assert vz["location"]["line"] == line_z
    assert (vy["shape"], vy["dtype"], vy["bytes"], vy["requires_grad"], vy["is_leaf"]) == ([1, 3], "float32", 12,
                                                                                           True, False)
    mul = node(doc, vy["node"])
    assert mul["op"] == "MulBackward" and mul["class_name"] == "Mul" and not mul["custom"]
    assert mul["location"]["line"] == line_y and mul["outputs"] == [vy["id"]]
    vx = var_named(doc, "x")
    assert mul["input_variables"] == [vx["id"]] and vx["is_leaf"] and vx["origin"] == "external"
    acc = node(doc, mul["inputs"][0][0])
    assert acc["op"] == "AccumulateGrad" and acc["variable"] == vx["id"] and vx["accumulator"] == acc["id"]
    total = node(doc, vz["node"])
    assert total["op"] == "SumBackward" and total["inputs"] == [[mul["id"], 0]] and total["shape"] == []
    graph = doc["graphs"][0]
    assert sorted(graph["nodes"]) == sorted([acc["id"], mul["id"], total["id"]]) and graph["roots"] == [total["id"]]


def test_ids_follow_creation_order_and_names_come_from_the_frame():
    with gradviz.trace() as tr:
        a = gradviz.randn(2, 2, requires_grad=True)
        b = gradviz.ones(2, 2, requires_grad=True)
        b.name = "bias"
        c = a @ b
        c.sum().backward()
    doc = tr.to_dict()
    assert [v["id"] for v in doc["variables"]] == sorted(v["id"] for v in doc["variables"])
    assert var_named(doc, "a")["id"] < var_named(doc, "bias")["id"] < var_named(doc, "c")["id"]
    assert var_named(doc, "a")["origin"] == "factory"


class Fake:
    """A minimal module-like object: emits on_module_call like nn.Module, has named_modules/named_parameters."""

    def __init__(self, **children):
        self.children = children
        self.weight = gradviz.randn(3, 3, requires_grad=True)

    def named_modules(self):
        yield "", self
        for name, child in self.children.items():
            for sub, m in child.named_modules():
                yield (f"{name}.{sub}" if sub else name), m

    def named_parameters(self):
        for name, m in self.named_modules():
            yield (f"{name}.weight" if name else "weight"), m.weight

    def __call__(self, x):
        from gradviz.autograd import observer

        for o in observer.active():
            o.on_module_call(self, "enter", inputs=(x,))
        try:
            out = x @ self.weight
            for child in self.children.values():
                out = child(out)
            return out
        finally:
            for o in observer.active():
                o.on_module_call(self, "exit", output=out)


def test_module_stack_and_parameter_paths_with_a_fake_module():
    model1 = Fake(inner=Fake())
    x = gradviz.randn(2, 3)
    with gradviz.trace() as tr:
        out = model1(x)
        out.sum().backward()
    doc = tr.to_dict()
    ops = [n for n in doc["nodes"] if n["op"] == "MatMulBackward"]
    assert [n["module"] for n in ops] == [["model1"], ["model1", "model1.inner"]]
    names = {v["name"] for v in doc["variables"] if v["is_parameter"]}
    assert names == {"model1.weight", "model1.inner.weight"}


def test_nn_sequential_paths_and_parameter_names():
    gradviz.manual_seed(0)
    model1 = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    x = gradviz.randn(5, 4)
    with gradviz.trace() as tr:
        loss = model1(x).sum()
        loss.backward()
    doc = tr.to_dict()
    params = {v["name"] for v in doc["variables"] if v["is_parameter"]}
    assert params == {"model1.0.weight", "model1.0.bias", "model1.2.weight", "model1.2.bias"}
    relu = next(n for n in doc["nodes"] if n["op"] == "ReluBackward")
    assert relu["module"] == ["model1", "model1.1"]
    leaf_norms = doc["backwards"][0]["leaf_grad_norms"]
    weight = var_named(doc, "model1.0.weight")
    assert leaf_norms[str(weight["id"])] == pytest.approx(float(np.linalg.norm(model1[0].weight.grad.numpy())),
                                                         rel=1e-5)


def test_backward_record_visits_norms_and_location():
    w = gradviz.tensor([1.0, -2.0, 3.0], requires_grad=True)
    with gradviz.trace() as tr:
        y = w * 3
        loss = (y * y).sum()
        loss.backward(); line = here()  # noqa: E702
    b = tr.to_dict()["backwards"][0]
    assert b["location"]["line"] == line and b["retain_graph"] is False and b["error"] is None
    assert len(b["visited"]) == 4  # Sum, Mul, Mul, AccumulateGrad
    doc = tr.to_dict()
    assert b["roots"] == [var_named(doc, "loss")["id"]]
    assert b["leaf_grad_norms"][str(var_named(doc, "w")["id"])] == pytest.approx(18 * np.sqrt(14), rel=1e-6)
    assert all(n["freed_by"] == 0 for n in doc["nodes"] if n["op"] != "AccumulateGrad")


def test_seed_backward_of_none_grad_links_the_read_and_classifies_the_error():
    X = gradviz.randn(1, 5, requires_grad=True)
    with gradviz.trace() as tr:
        y1 = X.pow(3)
        loss = (y1 / 2).sum()
        loss.backward(retain_graph=True)
        with pytest.warns(UserWarning):
            with pytest.raises(RuntimeError, match="only for scalar outputs"):
                line = here() + 1
                y1.backward(y1.grad)
    doc = tr.to_dict()
    read = next(e for e in doc["events"] if e["kind"] == "grad_read")
    assert read["was_none"] and not read["is_leaf"] and not read["retains_grad"] and read["location"]["line"] == line
    assert read["variable"] == var_named(doc, "y1")["id"]
    failed = doc["backwards"][1]
    assert failed["error"]["code"] == "nonscalar-backward" and failed["gradient_from"] == read["id"]
    assert failed["location"]["line"] == line and failed["visited"] == []


def test_stale_version_is_predicted_at_the_inplace_op_and_classified_at_backward():
    a = gradviz.randn(4, requires_grad=True)
    with gradviz.trace() as tr:
        b = a * 2
        c = b.sigmoid()  # saves its output
        c.mul_(3); line = here()  # noqa: E702
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            c.sum().backward()
    doc = tr.to_dict()
    ev = next(e for e in doc["events"] if e["kind"] == "inplace")
    sig = next(n for n in doc["nodes"] if n["op"] == "SigmoidBackward")
    assert ev["location"]["line"] == line and (ev["old_version"], ev["new_version"]) == (0, 1)
    assert ev["saved_by"] == [sig["id"]] and ev["variable"] == var_named(doc, "c")["id"]
    err = doc["backwards"][0]["error"]
    assert err["code"] == "stale-version" and err["node"] == sig["id"] and (err["expected"], err["current"]) == (0, 1)


def test_inplace_on_unsaved_storage_predicts_nothing():
    a = gradviz.randn(4, requires_grad=True)
    with gradviz.trace() as tr:
        b = a + 1  # Add saves nothing
        b.mul_(2)
        b.sum().backward()
    ev = next(e for e in tr.to_dict()["events"] if e["kind"] == "inplace")
    assert ev["saved_by"] == [] and ev["op"] == "MulBackward"


def test_grad_reads_writes_hooks_and_detach_events():
    w = gradviz.randn(3, requires_grad=True)
    seen = []
    with gradviz.trace() as tr:
        h = w * 2
        h.retain_grad()
        handle = h.register_hook(lambda g: seen.append(g)); line_reg = here()  # noqa: E702
        h.sum().backward()
        assert h.grad is not None and w.grad is not None
        handle.remove()
        w.grad = None
        v = gradviz.Variable(h.data, requires_grad=True); line_cut = here()  # noqa: E702, F841
    doc = tr.to_dict()
    hooks = [e for e in doc["events"] if e["kind"] == "hook"]
    assert [(e["event"], e["retain_grad"]) for e in hooks] == [("register", True), ("register", False),
                                                                ("call", False), ("remove", False)]
    assert hooks[1]["location"]["line"] == line_reg and hooks[2]["backward"] == 0
    reads = [e for e in doc["events"] if e["kind"] == "grad_read"]
    assert [(e["was_none"], e["is_leaf"], e["retains_grad"]) for e in reads] == [(False, False, True),
                                                                                 (False, True, False)]
    assert [e["kind"] for e in doc["events"]].count("grad_write") == 1
    cut = next(e for e in doc["events"] if e["kind"] == "detach")
    assert cut["how"] == "data" and cut["location"]["line"] == line_cut
    data_var = next(x for x in doc["variables"] if x["id"] == cut["result"])
    assert data_var["origin"] == "data" and data_var["source"] == var_named(doc, "h")["id"]
    assert var_named(doc, "v")["source"] == data_var["id"]  # the re-wrap is traced back to the cut
    assert len(seen) == 1


def test_unrecorded_ops_on_grad_inputs_are_recorded_with_grad_mode():
    w = gradviz.randn(3, requires_grad=True)
    with gradviz.trace() as tr:
        with gradviz.no_grad():
            frozen = w * 2  # noqa: F841 - the trace finds it by name
        idx = w.argmax()  # noqa: F841
    doc = tr.to_dict()
    f = var_named(doc, "frozen")
    assert f["grad_mode"] is False and f["node"] is None and f["op"] == "MulBackward"
    assert f["inputs"] == [var_named(doc, "w")["id"]]
    assert var_named(doc, "idx")["grad_mode"] is True and var_named(doc, "idx")["requires_grad"] is False


def test_nonfinite_forward_and_backward_first_offender():
    x = gradviz.tensor([1.0, 0.0], requires_grad=True)
    with gradviz.trace() as tr:
        y = x * 1.0
        z = y.log(); line = here()  # noqa: E702
        z.sum().backward()
    doc = tr.to_dict()
    log = node(doc, var_named(doc, "z")["node"])
    assert log["nonfinite"] == "forward" and doc["first_nonfinite"]["node"] == log["id"]
    assert doc["first_nonfinite"]["phase"] == "forward" and log["location"]["line"] == line
    x2 = gradviz.tensor([0.0, 1.0], requires_grad=True)
    with gradviz.trace() as tr2:
        s = x2.sqrt()  # finite forward, infinite gradient at 0
        s.sum().backward()
    doc2 = tr2.to_dict()
    first = doc2["first_nonfinite"]
    assert first["phase"] == "backward" and node(doc2, first["node"])["op"] == "AccumulateGrad"


def test_thousand_iterations_make_one_structure_and_a_small_document():
    gradviz.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    opt = gradviz.optim.SGD(model.parameters(), lr=0.01)
    x, target = gradviz.randn(4, 8), gradviz.randn(4, 1)
    with gradviz.trace() as tr:
        for _ in range(1000):
            opt.zero_grad()
            loss = ((model(x) - target) ** 2).mean()
            loss.backward()
            opt.step()
    doc = tr.to_dict()
    assert doc["iterations"] == 1000
    assert [(s["count"], s["iterations"]) for s in doc["structures"]] == [(1000, [0, 999])]
    kept = sorted({g["iteration"] for g in doc["graphs"]})
    assert kept == [0, 1, 2, 997, 998, 999]
    assert doc["dropped"]["iterations"] == 994 and doc["dropped"]["nodes"] > 5000
    assert len(doc["backwards"]) == 6 and len(doc["memory"]["series"]) == 1000
    assert doc["memory"]["final_retained_bytes"] == 0
    import json

    assert len(json.dumps(doc)) < 185_000  # 1,000 series points of ~180 bytes (each with its own peak)
    assert tr.stats["backward_calls"] == 1000 and tr.stats["iterations"] == 1000


def test_iterations_split_at_backward_and_at_a_repeated_start_line():
    w = gradviz.randn(3, requires_grad=True)
    with gradviz.trace() as tr:
        for _ in range(3):
            (w * 2).sum().backward()
        for _ in range(4):  # forward only: the same line starting a new graph starts a new iteration
            (w * 3).exp().sum()
    doc = tr.to_dict()
    assert doc["iterations"] == 7
    assert [s["count"] for s in doc["structures"]] == [3, 4]


def test_tracing_keeps_no_graph_alive():
    w = gradviz.randn(50, requires_grad=True)
    with gradviz.trace() as tr:
        y = (w * 2).exp()
        loss = y.sum()
    node_ref = weakref.ref(loss.grad_fn)
    y_ref = weakref.ref(y)
    del y, loss
    gc.collect()
    assert node_ref() is None and y_ref() is None
    doc = tr.to_dict()
    assert doc["graphs"][0]["alive_at_end"] is True  # alive when the trace stopped
    assert tr.memory["final_retained_bytes"] == 200  # exp saved its 50-float output


def test_graph_dropped_inside_the_trace_is_not_alive_at_end():
    w = gradviz.randn(50, requires_grad=True)
    with gradviz.trace() as tr:
        loss = (w * 2).exp().sum()
        del loss
        gc.collect()
    assert tr.to_dict()["graphs"][0]["alive_at_end"] is False
    assert tr.memory["final_retained_bytes"] == 0 and tr.memory["peak_retained_bytes"] == 200


def test_snapshot_of_a_live_graph_names_parameters_from_the_caller():
    gradviz.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 2), nn.Tanh())
    out = net(gradviz.randn(4, 3)).sum()
    doc = snapshot(out)
    ops = sorted(n["op"] for n in doc["nodes"])
    assert "TanhBackward" in ops and ops.count("AccumulateGrad") == 2
    params = {v["name"] for v in doc["variables"] if v["is_parameter"]}
    assert params == {"net.0.weight", "net.0.bias"}
    root = var_named(doc, "out")
    assert node(doc, root["node"])["op"] == "SumBackward" and len(doc["graphs"]) == 1
    assert doc["graphs"][0]["roots"] == [root["node"]]
    tanh = next(n for n in doc["nodes"] if n["op"] == "TanhBackward")
    assert tanh["shape"] == [4, 2] and tanh["saved"][0]["kind"] == "output" and tanh["saved"][0]["bytes"] == 32


def test_stats_are_cheap_counters():
    w = gradviz.randn(3, requires_grad=True)
    tr = gradviz.trace().start()
    (w * 2).sum().backward()
    s = tr.stats
    tr.stop()
    assert (s["backward_calls"], s["iterations"], s["retained_bytes"]) == (1, 1, 0)
    assert "stopped" in repr(tr)


def test_exception_in_the_block_is_summarised_without_keeping_frames():
    w = gradviz.randn(3, requires_grad=True)
    with pytest.raises(ValueError):
        with gradviz.trace() as tr:
            y = w * 2
            line = here() + 1
            raise ValueError("boom")
    status = tr.to_dict()["status"]
    assert status["completed"] is False and status["exception"]["type"] == "ValueError"
    assert status["exception"]["location"]["line"] == line
    ref = weakref.ref(y)
    del y
    gc.collect()
    assert ref() is None


# ----- structures ------------------------------------------------------------------------------------------------
def _mlp():
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))


def _cnn():
    return nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8, 3))


@pytest.mark.parametrize("make,shape", [(_mlp, (5, 4)), (_cnn, (5, 1, 4, 4))])
def test_a_clean_loop_is_one_structure_even_when_the_model_is_built_inside_the_trace(make, shape):
    gradviz.manual_seed(0)
    with gradviz.trace() as tr:
        model = make()  # iteration 0 creates the parameters' AccumulateGrad nodes between its ops
        opt = gradviz.optim.SGD(model.parameters(), lr=0.1)
        x, y = gradviz.randn(*shape), gradviz.tensor([0, 1, 2, 0, 1])
        for _ in range(3):
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
    doc = tr.to_dict()
    assert [(s["count"], s["iterations"]) for s in doc["structures"]] == [(3, [0, 2])]
    assert {g["structure"] for g in doc["graphs"]} == {0}


def test_structure_does_not_depend_on_the_order_branches_were_built_in():
    w = gradviz.randn(3, requires_grad=True)
    with gradviz.trace() as tr:
        for i in range(4):
            if i % 2:
                a = (w * 2).exp()
                b = (w * 3).tanh()
            else:
                b = (w * 3).tanh()
                a = (w * 2).exp()
            (a + b).sum().backward()
    doc = tr.to_dict()
    assert [(s["count"], s["iterations"]) for s in doc["structures"]] == [(4, [0, 3])]


def test_a_different_graph_is_a_new_structure():
    w = gradviz.randn(3, requires_grad=True)
    with gradviz.trace() as tr:
        for _ in range(2):
            h = w.exp()
            (h * h).sum().backward()  # one exp used twice
        for _ in range(2):
            (w.exp() * w.exp()).sum().backward()  # two exps: same ops in a list, not the same graph
        for _ in range(2):
            (w.exp() * w.exp()).mean().backward()
    doc = tr.to_dict()
    assert [(s["count"], s["iterations"], s["node_count"]) for s in doc["structures"]] == \
        [(2, [0, 1], 3), (2, [2, 3], 4), (2, [4, 5], 4)]
    assert len({s["signature"] for s in doc["structures"]}) == 3


def test_graphs_recognised_by_their_creation_order_get_the_structure_the_canonical_walk_gives():
    w1, w2 = gradviz.randn(3, requires_grad=True), gradviz.randn(3, requires_grad=True)
    model = nn.Sequential(nn.Linear(3, 2), nn.Tanh(), nn.Linear(2, 1))
    with gradviz.trace(window=8) as tr:
        for v in (w1, w1, w2, w1, w2):  # same ops, another leaf of the same shape: the same structure
            (v.exp() * 2).sum().backward()
        for _ in range(3):
            model(w1).sum().backward()
    doc = tr.to_dict()
    assert [(s["count"], s["iterations"]) for s in doc["structures"]] == [(5, [0, 4]), (3, [5, 7])]
    groups = tr.groups
    kept = [g for g in groups.graphs.values() if g.nodes and g.structure is not None]
    assert len(kept) == 7  # the last iteration is classified only in the document
    for g in kept:  # the shortcut's answer is the canonical walk's
        assert groups.structures[groups.structure_key(g)] is g.structure


def test_a_parameter_has_one_accumulator_record_shared_by_every_graph_that_uses_it():
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    opt = gradviz.optim.SGD(model.parameters(), lr=0.1)
    x = gradviz.randn(5, 3)
    with gradviz.trace(window=2) as tr:
        for _ in range(10):
            opt.zero_grad()
            model(x).pow(2).mean().backward()
            opt.step()
    doc = tr.to_dict()
    params = {v["id"]: v for v in doc["variables"] if v["is_parameter"]}
    accs = [n for n in doc["nodes"] if n["op"] == "AccumulateGrad"]
    assert sorted(n["variable"] for n in accs) == sorted(params)  # one per parameter, not one per iteration
    assert all(params[n["variable"]]["accumulator"] == n["id"] for n in accs)
    acc_ids = {n["id"] for n in accs}
    kept = [g for g in doc["graphs"] if g["full"]]
    assert [g["iteration"] for g in kept] == [0, 1, 8, 9]
    for g in kept:  # each kept graph lists the accumulators it fed
        assert acc_ids <= set(g["nodes"])
    assert {p["graphs_alive"] for p in doc["memory"]["series"]} == {0}  # parameters keep no graph alive


class _Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.Sequential(nn.Linear(3, 3), nn.Tanh())

    def forward(self, x):
        h = self.inner(x); line = here()  # noqa: E702
        self.lines.append(line)
        return h * 2


def test_ops_inside_gradviz_modules_are_located_at_the_innermost_user_line():
    model = nn.Sequential(_Scaled(), nn.Linear(3, 1))
    model[0].lines = []
    hook_lines = []

    def hook(module, args, out):
        hook_lines.append(here() + 1)
        return out.exp()

    x = gradviz.randn(2, 3)
    with gradviz.trace() as tr:
        out = model(x); line = here()  # noqa: E702
        model[1].register_forward_hook(hook)
        model(x)
    doc = tr.to_dict()
    ops = [(n["op"], n["location"]["line"]) for n in doc["nodes"] if n["location"] is not None]
    inner = model[0].lines
    assert ops == [("AddmmBackward", inner[0]), ("TanhBackward", inner[0]), ("MulBackward", inner[0] + 2),
                   ("AddmmBackward", line),
                   ("AddmmBackward", inner[1]), ("TanhBackward", inner[1]), ("MulBackward", inner[1] + 2),
                   ("AddmmBackward", line + 2), ("ExpBackward", hook_lines[0])]
    assert out.shape == (2, 1)


# ----- modules --------------------------------------------------------------------------------------------------
class Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(4, 6), nn.ReLU())
        self.fc = nn.Linear(6, 3)

    def forward(self, x):
        return self.fc(self.features(x))


def test_modules_field_names_every_called_module_and_follows_a_replaced_submodule():
    model = Backbone()
    x = gradviz.randn(2, 4)
    with gradviz.trace() as tr:
        model(x).sum().backward()
        model.fc = nn.Linear(6, 5)  # replaced after the first call: still model.fc
        model(x).sum().backward()
        model.features(x)  # a submodule called directly keeps its path
    doc = tr.to_dict()
    assert doc["modules"] == {"model": "Backbone", "model.features": "Sequential", "model.features.0": "Linear",
                              "model.features.1": "ReLU", "model.fc": "Linear"}
    addmms = [n for n in doc["nodes"] if n["op"] == "AddmmBackward"]
    assert [n["module"] for n in addmms] == [["model", "model.features", "model.features.0"], ["model", "model.fc"],
                                             ["model", "model.features", "model.features.0"], ["model", "model.fc"],
                                             ["model.features", "model.features.0"]]
    assert addmms[3]["shape"] == [2, 5]
    names = [v["name"] for v in doc["variables"] if v["is_parameter"] and v["shape"] == [5, 6]]
    assert names == ["model.fc.weight"]
    from gradviz.tracing import validate

    validate(doc)
    doc["modules"]["model"] = 3
    with pytest.raises(gradviz.tracing.TraceFormatError, match=r"^modules\.model: expected a string$"):
        validate(doc)


def test_module_paths_are_walked_once_per_tree_not_per_call(monkeypatch):
    model = Backbone()
    walks = []
    from gradviz.tracing.adapters.modules import ModuleNames

    original = ModuleNames.name_tree

    def counting(self, module, name, tree=None):
        walks.append(name)
        return original(self, module, name, tree)

    monkeypatch.setattr(ModuleNames, "name_tree", counting)
    x = gradviz.randn(2, 4)
    with gradviz.trace():
        for _ in range(5):
            model(x)
        model.fc = nn.Linear(6, 3)
        for _ in range(5):
            model(x)
    assert walks == ["model", "model"]


# ----- order, final state, ownership ------------------------------------------------------------------------------
def test_seq_orders_events_and_backward_calls_on_one_counter():
    w = gradviz.randn(3, requires_grad=True)
    with gradviz.trace() as tr:
        y = (w * 2).sum()
        w.grad  # noqa: B018 - a read before the backward
        y.backward()
        w.grad  # noqa: B018 - and one after
    doc = tr.to_dict()
    reads = [e for e in doc["events"] if e["kind"] == "grad_read"]
    (b,) = doc["backwards"]
    assert reads[0]["seq"] < b["seq"] < reads[1]["seq"]
    assert sorted([e["seq"] for e in doc["events"]] + [b["seq"]]) == list(range(len(doc["events"]) + 1))


def test_requires_grad_final_is_what_live_variables_ended_with():
    with gradviz.trace() as tr:
        model = nn.Linear(3, 2)
        model(gradviz.randn(1, 3))  # names its parameters
        model.weight.requires_grad = False  # frozen after creation
        dead = gradviz.randn(2, requires_grad=True)
        del dead
    doc = tr.to_dict()
    weight, bias = var_named(doc, "model.weight"), var_named(doc, "model.bias")
    assert (weight["requires_grad"], weight["requires_grad_final"]) == (True, False)
    assert (bias["requires_grad"], bias["requires_grad_final"]) == (True, True)
    (gone,) = [v for v in doc["variables"] if v["origin"] == "factory" and v["shape"] == [2]]
    assert (gone["requires_grad"], gone["requires_grad_final"]) == (True, None)  # dead before the end
    model.bias.requires_grad = False  # after the trace stopped: the document keeps the state at stop
    assert var_named(tr.to_dict(), "model.bias")["requires_grad_final"] is True


def test_grad_variables_name_their_leaf_and_module_zero_grad_is_an_event():
    model = nn.Linear(3, 2)
    x = gradviz.randn(4, 3)
    with gradviz.trace() as tr:
        model(x).sum().backward()
        model.zero_grad(); line_zero = here()  # noqa: E702
        model(x).sum().backward()
    doc = tr.to_dict()
    weight, bias = var_named(doc, "model.weight"), var_named(doc, "model.bias")
    grads = [v for v in doc["variables"] if v["origin"] == "grad"]
    assert [g["source"] for g in grads] == [weight["id"], bias["id"]] * 2 or \
        [g["source"] for g in grads] == [bias["id"], weight["id"]] * 2
    (zero,) = [e for e in doc["events"] if e["kind"] == "optimizer"]
    assert (zero["event"], zero["optimizer"], zero["location"]["line"]) == ("zero_grad", "Linear", line_zero)
    assert sorted(zero["parameters"]) == sorted([weight["id"], bias["id"]])


def test_optimizer_step_on_weights_a_live_graph_saved_is_predicted_at_the_step():
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    opt = gradviz.optim.SGD(model.parameters(), lr=0.1)
    x = gradviz.randn(5, 3)
    with gradviz.trace() as tr:
        model(x).pow(2).mean().backward()
        opt.step()  # a normal step after a backward that freed the graph: nothing recorded in place
        loss = model(x).pow(2).mean(); line_loss = here()  # noqa: E702
        opt.step(); line_step = here()  # noqa: E702 - updates the weights the graph of `loss` saved
        with pytest.raises(gradviz.errors.StaleVersionError):
            loss.backward()
    doc = tr.to_dict()
    (event,) = [e for e in doc["events"] if e["kind"] == "inplace"]
    assert (event["location"]["line"], event["op"], event["node"]) == (line_step, "SGD.step", None)
    assert event["variable"] == var_named(doc, "model.2.weight")["id"]
    (saver,) = [node(doc, n) for n in event["saved_by"]]
    assert (saver["op"], saver["location"]["line"]) == ("AddmmBackward", line_loss)
    assert doc["backwards"][-1]["error"]["code"] == "stale-version"
    assert doc["backwards"][-1]["error"]["node"] == saver["id"]


def test_repr_html_shows_the_graph():
    import shutil

    if shutil.which("dot") is None:
        pytest.skip("graphviz's dot is not installed")
    w = gradviz.randn(3, requires_grad=True)
    with gradviz.trace() as tr:
        (w * 2).sum().backward()
    html = tr._repr_html_()
    assert isinstance(html, str) and "<svg" in html and "MulBackward" in html


def test_copyslices_node_has_the_base_shape():
    base = gradviz.randn(3, 4, requires_grad=True) * 1
    with gradviz.trace() as tr:
        view = base[:, :2]
        view.mul_(2)
        base.sum()
    doc = tr.to_dict()
    copies = [n for n in doc["nodes"] if n["op"] == "CopySlices"]
    assert [(n["shape"], n["dtype"]) for n in copies] == [([3, 4], "float32")]
