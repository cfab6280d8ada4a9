"""The torch adapter's exact-memory mode (``gradviz.trace(engine="torch", exact_memory=True)``): saved tensors
seen through ``saved_tensors_hooks`` packs. The retained bytes equal what autograd really keeps (measured here
by a hooks pair of the test's own, untraced), values are those of the untraced program, and each trap of
saved-tensor hooks is handled: PyTorch's stale-version error, saved outputs freed, checkpointing, a user's own
hooks, ``disable_saved_tensors_hooks``, threads."""

import gc
import os
import textwrap
import threading
import warnings
import weakref

import pytest

torch = pytest.importorskip("torch")

import gradviz  # noqa: E402
from gradviz.document import load_trace  # noqa: E402
from gradviz.tracing.adapters.torch import compat as torch_compat  # noqa: E402

from . import test_diagnose_e2e as e2e  # noqa: E402
from .shared_traces import default_torch_trace, trace_source, traced  # noqa: E402
from .test_torch_parity import SAMPLES, _samples, summary, to_torch  # noqa: E402

_MISSING = torch_compat.probe(torch).exact  # the internals --exact-memory needs that this torch lacks (2.4)
pytestmark = [pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning"),
              pytest.mark.skipif(_MISSING is not None, reason=f"torch {torch.__version__} has no {_MISSING}: "
                                 "--exact-memory says so and measures as the default mode (test_torch_compat)")]
hooks_top = getattr(torch._C._autograd, "_top_saved_tensors_default_hooks", None)


def exact_trace():
    return gradviz.trace(engine="torch", exact_memory=True)


def real_saved_bytes(run):
    """What autograd keeps for backward while ``run()``'s result lives, untraced: the storages of every tensor
    a node saves, each once, parameters' storage not (it is the model's), as the trace charges them."""
    storages = {}

    def pack(t):
        base = t._base if t._base is not None else t
        if not (base.is_leaf and base.requires_grad):
            s = t.untyped_storage()
            storages[s.data_ptr()] = s.nbytes()
        return t.detach()

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        result = run()
    return sum(storages.values()), result


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32), torch.nn.Tanh(),
                               torch.nn.Linear(32, 3))


class ScaledSquare(torch.autograd.Function):
    """Saves its input and an intermediate it made (the intermediate is new memory only this node holds)."""

    @staticmethod
    def forward(ctx, x, w):
        square = x * x
        ctx.save_for_backward(x, w, square)
        return square * w

    @staticmethod
    def backward(ctx, grad):
        x, w, square = ctx.saved_tensors
        return grad * 2 * x * w, (grad * square).sum(0)


def test_an_mlp_retains_exactly_the_bytes_autograd_saves_and_its_values_are_untouched():
    model = mlp()
    x = torch.randn(16, 8)

    def run():
        return model(x).pow(2).mean()

    expected, loss0 = real_saved_bytes(run)
    assert expected > 0
    with exact_trace() as tr:
        loss = run()
        retained = tr.memory["final_retained_bytes"]
        loss.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    loss0.backward()
    assert retained == expected
    assert torch.equal(loss, loss0)
    assert all(torch.equal(g, p.grad) for g, p in zip(grads, model.parameters()))
    doc = tr.to_dict()
    assert doc["engine"]["memory"] == "saved-tensors-hooks" and not doc["internal_errors"]
    relu = [n for n in doc["nodes"] if n["op"] == "ReluBackward0"]
    assert [(s["kind"], s["shape"], s["bytes"]) for s in relu[0]["saved"]] == [("output", [16, 32], 16 * 32 * 4)]


def test_a_custom_function_retains_what_its_ctx_saved():
    w = torch.randn(5, requires_grad=True)
    x = torch.randn(4, 5)

    def run():
        return ScaledSquare.apply(x * 1, w).sum()

    expected, out0 = real_saved_bytes(run)
    assert expected == 2 * 4 * 5 * 4  # x * 1 and the square; w is a leaf that requires grad
    with exact_trace() as tr:
        out = run()
        retained = tr.memory["final_retained_bytes"]
    assert retained == expected and torch.equal(out, out0)
    node = [n for n in tr.to_dict()["nodes"] if n["class_name"] == "ScaledSquare"][0]
    assert [(s["kind"], s["shape"]) for s in node["saved"]] == [("input", [4, 5]), ("input", [5]), ("input", [4, 5])]


def _inplace(op):
    def run(w, x):
        y = x * w
        op(y)
        return y.sum()

    return run


def _module(make, shape):
    def run(w, x):
        torch.manual_seed(1)
        return make()((x * w).reshape(shape))[0].sum()

    return run


SAVERS = {  # one call building many nodes, in-place ops saving a clone of their target's old value
    "mul_": _inplace(lambda y: y.mul_(y.detach() + 1)), "clamp_": _inplace(lambda y: y.clamp_(-0.5, 0.5)),
    "silu_": _inplace(lambda y: torch.nn.functional.silu(y, inplace=True)), "sigmoid_": _inplace(torch.sigmoid_),
    "gru": _module(lambda: torch.nn.GRU(6, 5), (4, 1, 6)), "lstm": _module(lambda: torch.nn.LSTM(6, 5), (4, 1, 6)),
    "transformer": _module(lambda: torch.nn.TransformerEncoderLayer(6, 2, 8, dropout=0.0), (4, 1, 6)),
    "batchnorm": lambda w, x: torch.nn.BatchNorm1d(6)(x * w).sum(),
    "cross_entropy": lambda w, x: torch.nn.functional.cross_entropy(x * w, torch.tensor([0, 1, 2, 3])),
}


@pytest.mark.parametrize("name", sorted(SAVERS))
def test_ops_building_many_nodes_and_inplace_ops_retain_the_real_bytes(name):
    w = torch.randn(6, requires_grad=True)
    x = torch.randn(4, 6)
    expected, out0 = real_saved_bytes(lambda: SAVERS[name](w, x))
    with exact_trace() as tr:
        out = SAVERS[name](w, x)
        retained = tr.memory["final_retained_bytes"]
    assert expected > 0 and retained == expected
    assert torch.equal(out, out0) and not tr.to_dict()["internal_errors"]


def test_checkpointed_regions_hold_only_checkpoint_placeholders():
    model = mlp()
    x = torch.randn(16, 8)

    def run():
        h = torch.utils.checkpoint.checkpoint(model, x * 1, use_reentrant=False)
        return (h * h).sum()  # outside the region: saves h twice, one storage

    expected, out0 = real_saved_bytes(run)
    assert expected == 16 * 3 * 4 + 16 * 8 * 4  # h, and the input checkpoint keeps to recompute the region
    with exact_trace() as tr:
        out = run()
        retained = tr.memory["final_retained_bytes"]
        out.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    out0.backward()
    assert retained == expected and torch.equal(out, out0)
    assert all(torch.equal(g, p.grad) for g, p in zip(grads, model.parameters()))
    doc = tr.to_dict()
    assert not doc["internal_errors"]
    inside = [n for n in doc["nodes"] if n["op"] == "ReluBackward0"][0]  # saved, as a placeholder
    assert [(s["kind"], s["bytes"]) for s in inside["saved"]] == [("output", 16 * 32 * 4)]


# ----- trap 1: PyTorch's stale-version error ---------------------------------------------------------------------
class Two(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 1, x * 2

    @staticmethod
    def backward(ctx, a, b):
        return a + 2 * b


def _stale_output(x):
    y = x.exp()
    y.add_(1)
    y.sum().backward()


def _stale_input(x):
    y = x * 1
    w = y.sin()
    y.add_(1)
    w.sum().backward()


def _stale_view_of_a_dead_view(x):
    y = (x * 1).reshape(2, 2)
    w = y.t().sin()
    y.add_(1)
    w.sum().backward()


def _stale_resized(x):
    y = x * 1
    w = y.sin()
    y.unsqueeze_(0)
    w.sum().backward()


def _stale_second_output_of_a_function(x):
    a, b = Two.apply(x)
    y = b.sin()
    with torch.no_grad():
        b.add_(1)
    y.sum().backward()


def _stale_plain_tensor_given_a_graph(x):
    u = torch.ones(4)
    y = x * u
    u.mul_(x)
    y.sum().backward()


def _stale_through_a_slice(x):
    y = x * 1
    w = y.sin()
    y[0:2].add_(1)
    w.sum().backward()


def _stale_double_scalar(x):
    y = x.double().sum().exp()
    y.mul_(2)
    y.backward()


STALE = [_stale_output, _stale_input, _stale_view_of_a_dead_view, _stale_resized, _stale_second_output_of_a_function,
         _stale_plain_tensor_given_a_graph, _stale_through_a_slice, _stale_double_scalar]


def _error_of(case):
    x = torch.randn(4, requires_grad=True)
    with pytest.raises(RuntimeError) as info:
        case(x)
    return type(info.value), str(info.value)


@pytest.mark.parametrize("anomaly", [False, True], ids=["plain", "anomaly-mode"])
@pytest.mark.parametrize("case", STALE, ids=[c.__name__ for c in STALE])
def test_pytorchs_stale_version_error_is_raised_with_its_own_type_and_message(case, anomaly):
    with warnings.catch_warnings(), torch.autograd.set_detect_anomaly(anomaly):
        warnings.simplefilter("ignore")
        untraced = _error_of(case)
        with exact_trace():
            traced = _error_of(case)
    assert "is at version" in untraced[1]
    assert traced == untraced


def test_a_stale_saved_tensor_is_still_predicted_at_the_inplace_line():
    with exact_trace() as tr:
        x = torch.randn(3, requires_grad=True)
        y = x.exp()
        y.add_(1)  # the line
        try:
            y.sum().backward()
        except RuntimeError:
            pass
    found = [d for d in tr.to_dict()["diagnostics"] if d["code"] == "stale-version"]
    assert found and found[0]["location"]["text"] == "y.add_(1)  # the line"


# ----- trap 2: no leak ----------------------------------------------------------------------------------------
def test_a_saved_output_is_freed_when_its_graph_dies():
    x = torch.randn(256, requires_grad=True)
    with exact_trace() as tr:
        y = (x * 1).exp()  # ExpBackward0 saves its output y
        z = y.sum()
        gone = weakref.ref(y)
        held = tr.memory["final_retained_bytes"]
        del y, z
        gc.collect()
        assert gone() is None
        assert tr.memory["final_retained_bytes"] == 0
    assert held == 256 * 4


def test_hooks_and_patches_are_gone_after_the_trace():
    enter = torch.autograd.graph.saved_tensors_hooks.__enter__
    disable = torch._C._autograd._saved_tensors_hooks_disable
    with exact_trace():
        assert hooks_top(True) is not None
        assert torch.autograd.graph.saved_tensors_hooks.__enter__ is not enter
    assert hooks_top(True) is None
    assert torch.autograd.graph.saved_tensors_hooks.__enter__ is enter
    assert torch._C._autograd._saved_tensors_hooks_disable is disable
    with gradviz.trace(engine="torch"):  # the default mode installs no hooks
        assert hooks_top(True) is None


# ----- trap 3: a user's hooks, disable_saved_tensors_hooks ------------------------------------------------------
def test_a_users_hooks_stack_with_ours_and_what_they_keep_is_charged():
    model = mlp()
    x = torch.randn(16, 8)
    copies = []

    def keep_a_copy(t):  # new memory for every saved tensor, parameters included
        copy = t.detach().clone()
        copies.append(copy.nbytes)
        return copy

    def run():
        with torch.autograd.graph.saved_tensors_hooks(keep_a_copy, lambda t: t):
            return model(x).sum()

    out0 = run()
    expected = sum(copies)
    copies.clear()
    with exact_trace() as tr:
        out = run()
        retained = tr.memory["final_retained_bytes"]
        out.backward()
    assert copies and retained == expected == sum(copies)
    assert retained > real_saved_bytes(run)[0]  # more than autograd keeps without the user's hooks
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    out0.backward()
    assert torch.equal(out, out0) and all(torch.equal(g, p.grad) for g, p in zip(grads, model.parameters()))


def test_save_on_cpu_under_the_trace():
    model = mlp()
    x = torch.randn(16, 8)

    def run():
        with torch.autograd.graph.save_on_cpu():
            return model(x * 1).sum()  # on the CPU already: kept as it is

    expected = real_saved_bytes(lambda: model(x * 1).sum())[0]
    out0 = run()
    with exact_trace() as tr:
        out = run()
        retained = tr.memory["final_retained_bytes"]
        out.backward()
    assert retained == expected > 0 and torch.equal(out, out0)


def test_a_users_own_pack_and_unpack_both_run_under_the_trace():
    calls = []

    def pack(t):
        calls.append("pack")
        return t.detach() * 1

    def unpack(t):
        calls.append("unpack")
        return t

    x = torch.randn(5, requires_grad=True)
    with exact_trace():
        with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
            y = (x * 1).exp().sum()
        y.backward()
    assert calls == ["pack", "unpack"]
    assert torch.allclose(x.grad, x.exp())


def _counting_hooks(calls):
    def pack(t):
        calls.append("pack")
        return t.detach()

    return torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t)


def test_a_trace_started_inside_a_users_hooks_block_outlives_it():
    calls = []
    x = torch.randn(3, requires_grad=True)
    tr = exact_trace()
    with _counting_hooks(calls):
        tr.start()
        (x * 1).exp()  # the user's pack does not run: ours is the innermost pair now
    assert hooks_top(True)[0] == tr.adapters[0].exact.pack  # the block ended: its pair went, ours stays
    y = (x * 1).exp()
    assert tr.memory["final_retained_bytes"] == 3 * 4
    tr.stop()
    assert hooks_top(True) is None and calls == []
    y.sum().backward()


def test_a_trace_stopped_inside_a_users_hooks_block_leaves_that_block_working():
    calls = []
    x = torch.randn(3, requires_grad=True)
    tr = exact_trace()
    tr.start()
    with _counting_hooks(calls):
        (x * 1).exp()
        tr.stop()  # ours leaves from under the user's pair
        assert hooks_top(True) is not None
        (x * 2).exp()
    assert calls == ["pack", "pack"] and hooks_top(True) is None


def test_disable_saved_tensors_hooks_works_under_the_trace_and_memory_is_still_booked():
    x = torch.randn(6, requires_grad=True)
    with exact_trace() as tr:
        with torch.autograd.graph.disable_saved_tensors_hooks("no hooks here"):
            y = x.exp()  # read from its saved attributes while our hooks step aside
            inside = tr.memory["final_retained_bytes"]
            with pytest.raises(RuntimeError, match="no hooks here"):  # as untraced: a user's hooks are refused
                with torch.autograd.graph.save_on_cpu():
                    pass
        z = x.exp()  # our hooks are back
        after = tr.memory["final_retained_bytes"]
        assert hooks_top(True) is not None
        (y.sum() + z.sum()).backward()
    assert inside == 6 * 4 and after == 2 * 6 * 4
    assert not tr.to_dict()["internal_errors"]
    assert torch.allclose(x.grad, 2 * x.exp())


def test_torch_func_transforms_which_disable_saved_tensor_hooks_run_under_the_trace():
    t = torch.randn(3)
    expected = torch.func.grad(lambda v: (v.sin() * 2).sum())(t)
    with exact_trace():
        got = torch.func.grad(lambda v: (v.sin() * 2).sum())(t)
        assert hooks_top(True) is not None
    assert torch.equal(got, expected)


def test_hooks_disabled_when_the_trace_starts_are_pushed_when_the_block_ends():
    x = torch.randn(4, requires_grad=True)
    tr = exact_trace()
    with torch.autograd.graph.disable_saved_tensors_hooks("later"):
        tr.start()
        assert hooks_top(True) is None
    y = (x * 1).exp()
    assert tr.memory["final_retained_bytes"] == 4 * 4
    tr.stop()
    assert hooks_top(True) is None
    y.sum().backward()


# ----- trap 4: threads ----------------------------------------------------------------------------------------
def test_a_thread_started_while_tracing_is_measured_and_checked_and_left_clean():
    found = {}

    def work():
        w = torch.randn(100, requires_grad=True)
        found["y"] = (w * 1).exp()
        try:
            _stale_output(torch.randn(4, requires_grad=True))
        except RuntimeError as exc:
            found["error"] = str(exc)
        found["hooks"] = hooks_top(True) is not None

    with exact_trace() as tr:
        thread = threading.Thread(target=work)
        thread.start()
        thread.join()
        retained = tr.memory["final_retained_bytes"]
    assert retained == 100 * 4 and found["hooks"]
    assert found["error"] == _error_of(_stale_output)[1]  # PyTorch's own message, in this torch's wording
    after = {}
    thread = threading.Thread(target=lambda: after.setdefault("hooks", hooks_top(True)))
    thread.start()
    thread.join()
    assert after["hooks"] is None


def test_a_trace_stopped_from_another_thread_leaves_this_threads_stack_at_its_blocks_end():
    x = torch.randn(3, requires_grad=True)
    with exact_trace() as tr:
        stopper = threading.Thread(target=tr.stop)
        stopper.start()
        stopper.join()
        assert hooks_top(True) is not None  # another thread cannot pop this thread's stack
        y = (x * 1).exp()
        y.add_(1)
        with pytest.raises(RuntimeError, match="is at version 1; expected version 0 instead"):  # still checked
            y.sum().backward()
    assert hooks_top(True) is None


# ----- the document, the API, the CLI -------------------------------------------------------------------------
def test_the_document_says_which_mode_measured_memory_and_loads(tmp_path):
    x = torch.randn(3, requires_grad=True)
    with gradviz.trace(engine="torch") as default:
        (x * 1).exp().sum().backward()
    with exact_trace() as exact:
        (x * 1).exp().sum().backward()
    assert default.to_dict()["engine"]["memory"] == "saved-attributes"
    assert load_trace(exact.to_json(tmp_path / "t.json"))["engine"]["memory"] == "saved-tensors-hooks"


def test_exact_memory_is_a_bool_and_a_no_op_on_gradviz_s_engine():
    with pytest.raises(TypeError, match="exact_memory must be True or False, got str 'yes'"):
        gradviz.trace(engine="torch", exact_memory="yes")
    with gradviz.trace(engine="gradviz", exact_memory=True) as tr:
        a = gradviz.tensor([1.0, 2.0], requires_grad=True)
        (a * a).sum().backward()
    doc = tr.to_dict()
    assert doc["engine"]["name"] == "gradviz" and "memory" not in doc["engine"]
    assert hooks_top(True) is None


def test_auto_watches_torch_with_exact_memory():
    with gradviz.trace(engine="auto", exact_memory=True) as tr:
        y = (torch.randn(7, requires_grad=True) * 1).exp()
        retained = tr.memory["final_retained_bytes"]
    assert retained == 7 * 4 and y is not None
    torch_engine = [e for e in tr.to_dict()["engine"].get("engines", [tr.to_dict()["engine"]]) if e["name"] == "torch"]
    assert torch_engine[0]["memory"] == "saved-tensors-hooks"


@pytest.mark.parametrize("command", ["run", "graph"])
def test_the_cli_flag(command, tmp_path):
    from click.testing import CliRunner

    from gradviz.cli import main

    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import torch
        x = torch.randn(4, 3, requires_grad=True)
        y = (x * 2).exp()
        y.add_(1)
        y.sum().backward()
    """))
    if command == "run":
        args = ["run", "--exact-memory", "--no-render", "--out", str(tmp_path / "out"), str(script)]
    else:
        args = ["graph", "--exact-memory", "-o", str(tmp_path / "g.dot"), str(script)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1, result.output  # the script's own failure: the stale-version error
    assert "is at version 1; expected version 0 instead" in result.output
    if command == "run":
        doc = load_trace(str(tmp_path / "out" / "report.json"))
        assert doc["engine"]["memory"] == "saved-tensors-hooks"
        assert "stale-version" in [d["code"] for d in doc["diagnostics"]]
    else:
        assert "ExpBackward0" in (tmp_path / "g.dot").read_text()


# ----- the same diagnostics as the default mode -----------------------------------------------------------------
def _trace(path, source, exact):
    return trace_source(path, source, "torch", exact_memory=exact)


@pytest.mark.parametrize("name,expected", _samples(), ids=[n for n, _ in _samples()])
def test_samples_give_the_same_diagnostics_as_the_default_mode(name, expected):
    path = os.path.join(SAMPLES, name)
    with open(path) as f:
        source = to_torch(f.read())
    default = default_torch_trace(path, source)  # shared with test_torch_parity and test_light_sees_everything
    exact = traced(path, "torch", source, exact_memory=True)  # run as the default one was
    assert not exact["internal_errors"] and not default["internal_errors"]
    assert sorted(summary(exact)) == sorted(summary(default))


def test_diagnostic_scenarios_give_the_same_diagnostics_as_the_default_mode(tmp_path, monkeypatch):
    compared = []
    original = e2e.run

    def run_both(tmp_path, body, name="script.py"):
        doc, lines = original(tmp_path, body, name)
        source = to_torch(e2e.PRELUDE + textwrap.dedent(body))
        path = tmp_path / ("torch_" + name)
        compared.append((name, summary(_trace(path, source, False)), _trace(path, source, True)))
        return doc, lines

    monkeypatch.setattr(e2e, "run", run_both)
    for i, scenario in enumerate(n for n in dir(e2e) if n.startswith("test_")):
        test = getattr(e2e, scenario)
        if getattr(test, "pytestmark", None):  # parametrized scenarios: their samples above cover them
            continue
        folder = tmp_path / f"s{i}"
        folder.mkdir()
        try:
            test(tmp_path=folder)
        except TypeError:  # a scenario taking other fixtures
            continue
    assert len(compared) > 10
    for name, default, exact in compared:
        assert not exact["internal_errors"], name
        assert sorted(summary(exact)) == sorted(default), name
