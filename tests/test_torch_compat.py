"""torch_compat: each internal the torch adapter touches, probed by what it does, and each fallback forced on the
installed torch gives the same document facts as the native path (or an honest not-measured entry)."""

import gc
import json
import re
import textwrap
import types
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import gradviz  # noqa: E402
from gradviz.tracing.adapters.torch import compat as torch_compat  # noqa: E402
from tests.marked_lines import marked_line  # noqa: E402
from tests.shared_traces import traced  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

SCRIPT = """\
import torch
import torch.nn as nn
torch.manual_seed(0)


class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return 2 * x * g


model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
x = torch.randn(16, 4)
for step in range(2):
    out = model(x)
    loss = Square.apply(out).mean()  # custom function line
    loss.backward()
kept = model(x).exp().sum()  # still held at the end
y = torch.sigmoid(torch.randn(5, requires_grad=True))
y.data.zero_()  # silent write
y.sum().backward()
a = torch.randn(3, requires_grad=True)
b = a * 2
c = b.sin()
b.add_(1)  # stale write
try:
    c.sum().backward()
except RuntimeError:
    pass
"""


def trace(tmp_path, source=SCRIPT, **options):
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(source))
    scope = {"__name__": "__main__", "__file__": str(path)}
    with gradviz.trace(engine="torch", **options) as tr:
        exec(compile(path.read_text(), str(path), "exec"), scope)
    return tr.to_dict()


def facts(doc):
    """What the saved-tensor reading decides: every node's saved tensors and where it was built, when it was
    freed, the memory figures and the diagnostics (code, line, message)."""
    nodes = [(n["op"], (n["location"] or {}).get("line"), n["freed_by"],
              [(s["kind"], s["index"], tuple(s["shape"]), s["bytes"], s["version"], s["variable"])
               for s in n["saved"]]) for n in doc["nodes"]]
    diagnostics = [(d["code"], (d.get("location") or {}).get("line"), d["message"]) for d in doc["diagnostics"]]
    return nodes, doc["memory"], diagnostics


def line_of(marker):
    return next(i for i, text in enumerate(SCRIPT.splitlines(), 1) if marker in text)


@pytest.fixture
def force(monkeypatch):
    def set_answer(**answers):
        for name, value in answers.items():
            monkeypatch.setitem(torch_compat.forced, name, value)
    return set_answer


# ----- what the installed torch answers ------------------------------------------------------------------------
def test_the_probe_reads_this_torch_by_behaviour():
    compat = torch_compat.probe(torch)
    raw = torch.autograd.function.Function.__dict__["apply"]
    assert compat.apply == ("classmethod" if isinstance(raw, classmethod) else "descriptor")
    node = torch.ones(2, requires_grad=True).exp().grad_fn
    # SavedTensor.data where this torch has it (2.13 and later), else the unpacking attributes (2.4, 2.9)
    has_data = isinstance(getattr(node._raw_saved_result, "data", None), torch.Tensor)
    assert compat.saved == ("data" if has_data else "unpack")
    assert node._saved_result is not None  # (what "unpack" reads)
    C = torch._C._autograd
    assert compat.exact == (None if hasattr(C, "_top_saved_tensors_default_hooks") else
                            "_top_saved_tensors_default_hooks")  # (2.4 lacks it; the other internals it has)
    assert compat.problems == []
    assert compat.node_shapes == hasattr(node, "_input_metadata")  # (2.4's nodes have none)
    assert compat.stale is torch_compat.STALE_DEFAULT
    assert not compat.is_compiling()


def test_the_stale_message_names_nodes_as_this_torch_does():
    """2.4 and 2.9 name the node "ExpBackward0", 2.13 and later "Exp": read from the message, not the version."""
    compat = torch_compat.probe(torch)
    x = torch.randn(3, requires_grad=True)
    y = x.exp()
    y.add_(1)
    with pytest.raises(RuntimeError) as info:
        y.sum().backward()
    assert f"which is output 0 of {compat.stale_name('ExpBackward0')}, is at version 1;" in str(info.value)
    assert {compat.stale_name("ExpBackward0"), torch_compat.short_node_name("ExpBackward0")} <= {"Exp",
                                                                                              "ExpBackward0"}
    assert [torch_compat.short_node_name(n) for n in ("UnsqueezeBackward1", "TwoBackward", "CopySlices")] == [
        "Unsqueeze1", "Two", "CopySlices"]


def test_fake_tensor_mode_counts_as_compiling():
    """AOTAutograd and inductor trace the model on fake tensors, and torch 2.4 calls a user's torch-function
    mode there with dynamo's flag off: the fake-tensor mode on the dispatch stack is what tells."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    compiling = torch_compat.probe(torch).is_compiling
    with FakeTensorMode():
        assert compiling()
    assert not compiling()


def test_saved_attribute_names_under_each_way_of_reading(force):
    force(saved="unpack")
    compat = torch_compat.probe(torch)
    assert compat.saved_attr("_raw_saved_self") == "_saved_self"
    assert compat.saved_attr("_raw_saved_tensors") == "saved_tensors"  # a custom Function's node
    force(saved="data")
    assert torch_compat.probe(torch).saved_attr("_raw_saved_self") == "_raw_saved_self"


def test_unpacked_reading_tells_freed_from_present():
    x = torch.randn(3, requires_grad=True)
    y = x.sin()
    assert [(i, t is x) for i, t in torch_compat.read_unpacked(y.grad_fn, "_saved_self")] == [(0, True)]
    y.sum().backward()
    assert torch_compat.read_unpacked(y.grad_fn, "_saved_self") == ((0, None),)  # as a freed .data reads


def test_unpacked_reading_of_an_overwritten_tensor_is_not_a_free():
    x = torch.randn(3, requires_grad=True)
    h = x * 1
    y = h.sin()
    h.add_(1)  # PyTorch's unpack now raises its stale-version error: nothing is known, nothing is freed
    assert torch_compat.read_unpacked(y.grad_fn, "_saved_self") == ()


# ----- Function.apply in both forms ---------------------------------------------------------------------------
def test_apply_as_a_c_descriptor_is_wrapped_and_put_back(tmp_path, monkeypatch):
    """torch 2.14's form (a C classmethod_descriptor in Function's dict), made here from _FunctionBase's own."""
    Function = torch.autograd.function.Function
    descriptor = torch._C._FunctionBase.__dict__["apply"]
    assert type(descriptor).__name__ == "classmethod_descriptor"
    monkeypatch.setattr(Function, "apply", descriptor)
    native = Function.__dict__["apply"]
    doc = trace(tmp_path)
    assert Function.__dict__["apply"] is native  # restored as it was
    squares = [n for n in doc["nodes"] if n["class_name"] == "Square"]
    assert [n["location"]["line"] for n in squares] == [line_of("custom function line")] * 2
    assert [s["shape"] for s in squares[0]["saved"]] == [[16, 1]]
    assert not doc["internal_errors"]


def test_apply_function_calls_either_form():
    class Double(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = torch.ones(2, requires_grad=True)
    for entry in (torch._C._FunctionBase.__dict__["apply"],
                  torch.autograd.function.Function.__dict__["apply"]):
        out = torch_compat.apply_function(entry)(Double, x)
        assert out.tolist() == [2.0, 2.0] and type(out.grad_fn).__name__ == "DoubleBackward"


# ----- saved tensors: the unpacking fallback (torch 2.4.1, 2.9.1) gives the native facts -------------------------
def test_unpacking_saved_tensors_gives_the_same_document_facts(tmp_path, force):
    # Python's cyclic collector off while tracing: a node held in a cycle (the caught RuntimeError's traceback)
    # would otherwise die whenever the allocation count says, which differs between the two runs
    gc.collect()
    gc.disable()
    try:
        native = facts(trace(tmp_path))
        force(saved="unpack")
        fallback_doc = trace(tmp_path)
    finally:
        gc.enable()
    assert facts(fallback_doc) == native
    assert fallback_doc["engine"]["memory"] == "saved-attributes"
    assert [u for u in fallback_doc["unseen"] if u["kind"] == "not-measured"] == []
    nodes, memory, diagnostics = native
    # the facts compared are not empty: memory held, tensors freed, both in-place cases found at their lines
    assert memory["final_retained_bytes"] > 0 and any(n[2] is not None for n in nodes)
    assert ("silent-inplace", line_of("silent write")) in [d[:2] for d in diagnostics]
    assert ("stale-version", line_of("stale write")) in [d[:2] for d in diagnostics]


def test_unpacking_under_a_users_saved_tensor_hooks_is_not_measured_rather_than_run(tmp_path, force):
    force(saved="unpack")
    calls = []
    source = """\
    import torch
    def pack(t):
        return t
    def unpack(t):
        calls.append(1)
        return t
    x = torch.randn(4, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        y = x.exp()
    """
    path = tmp_path / "hooked.py"
    path.write_text(textwrap.dedent(source))
    scope = {"__name__": "__main__", "__file__": str(path), "calls": calls}
    with gradviz.trace(engine="torch") as tr:
        exec(compile(path.read_text(), str(path), "exec"), scope)
    doc = tr.to_dict()
    assert calls == []  # the user's unpack did not run because of the trace
    entry = next(u for u in doc["unseen"] if u["kind"] == "not-measured")
    assert entry["what"] == "saved-tensor memory" and "saved_tensors_hooks" in entry["how"]


def test_where_the_hook_stack_cannot_be_read_pushes_are_counted(tmp_path, force, monkeypatch):
    """A torch without _top_saved_tensors_default_hooks (older lines; which ones not verified): the pushes made
    while tracing tell."""
    force(saved="unpack")
    monkeypatch.setattr(torch_compat, "top_hooks", lambda torch: None)
    C = torch._C._autograd
    push, pop = C._push_saved_tensors_default_hooks, C._pop_saved_tensors_default_hooks
    calls = []
    source = """\
    import torch
    def unpack(t):
        calls.append(1)
        return t
    x = torch.randn(4, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, unpack):
        y = x.exp()
    z = x.sin()  # after the block: read as usual
    """
    path = tmp_path / "hooked.py"
    path.write_text(textwrap.dedent(source))
    scope = {"__name__": "__main__", "__file__": str(path), "calls": calls}
    with gradviz.trace(engine="torch") as tr:
        exec(compile(path.read_text(), str(path), "exec"), scope)
    doc = tr.to_dict()
    assert calls == []
    assert [u["count"] for u in doc["unseen"] if u["what"] == "saved-tensor memory"] == [1]
    saved = {n["op"]: [s["bytes"] for s in n["saved"]] for n in doc["nodes"]}
    assert saved["ExpBackward0"] == [] and saved["SinBackward0"] == [16]
    assert C._push_saved_tensors_default_hooks is push and C._pop_saved_tensors_default_hooks is pop


def test_no_way_to_read_saved_tensors_says_memory_is_not_measured(tmp_path, force):
    force(saved=None)
    doc = trace(tmp_path)
    assert doc["engine"]["memory"] == "not-measured"
    entry = next(u for u in doc["unseen"] if u["what"] == "saved-tensor memory")
    assert entry["kind"] == "not-measured" and entry["how"].startswith(f"torch {torch.__version__}:")


# ----- --exact-memory, the stale-version wording ---------------------------------------------------------------
def test_exact_memory_without_its_internals_keeps_the_default_reading_and_says_so(tmp_path, force):
    force(exact="_saved_tensors_hooks_get_disabled_error_message")
    doc = trace(tmp_path, exact_memory=True)
    assert doc["engine"]["memory"] == "saved-attributes"
    entry = next(u for u in doc["unseen"] if u["kind"] == "not-measured")
    assert entry["what"] == "exact saved-tensor memory (--exact-memory)"
    assert entry["how"] == f"torch {torch.__version__} has no _saved_tensors_hooks_get_disabled_error_message"
    force(exact=None)
    assert facts(doc)[1] == facts(trace(tmp_path))[1]  # the figures are the default mode's


def test_the_stale_version_pattern_reads_pytorchs_own_message():
    x = torch.randn(2, requires_grad=True)
    h = x * 1
    y = h.sin()
    h.mul_(2)
    with pytest.raises(RuntimeError) as info:
        y.sum().backward()
    compat = torch_compat.probe(torch)
    assert torch_compat.stale_versions(compat.stale, str(info.value)) == (1, 0)


def test_a_reworded_stale_message_is_still_read():
    pattern = torch_compat._STALE_LOOSE
    assert torch_compat.stale_versions(pattern, "tensor at version 3, but version 2 was saved") == (3, 2)
    assert torch_compat.stale_versions(pattern, "no numbers here") is None


def test_stale_version_backward_error_carries_both_versions(tmp_path):
    doc = trace(tmp_path)
    errors = [b["error"] for b in doc["backwards"] if b.get("error")]
    assert [(e["code"], e["current"], e["expected"]) for e in errors] == [("stale-version", 1, 0)]


# ----- compile, accelerator ------------------------------------------------------------------------------------
def test_is_compiling_falls_back_to_dynamos_own_where_torch_compiler_lacks_it():
    without = types.SimpleNamespace(compiler=types.SimpleNamespace())
    from torch._dynamo.external_utils import is_compiling

    assert torch_compat._is_compiling(without) is is_compiling
    assert torch_compat._is_compiling(torch) is torch.compiler.is_compiling


COMPILED = """\
import torch
import torch.nn as nn
torch.manual_seed(0)
model = torch.compile(nn.Linear(4, 2), backend="aot_eager")
for n in (8, 8, 6, 5):  # new batch sizes: compiled again, with symbolic sizes
    loss = model(torch.randn(n, 4)).square().mean()
    loss.backward()
"""


def test_a_compiled_linear_runs_under_the_trace_as_untraced(tmp_path):
    """torch 2.4 called the trace's mode inside AOTAutograd's fake-tensor tracing: the trace's bookkeeping put
    "Unexpected fake buffer _tensor_constant0" in the compiled graph, and fake ops (sizes symbolic) in the
    document."""
    import torch._dynamo

    def run(traced):
        torch._dynamo.reset()  # compiled afresh each time
        scope = {"__name__": "__main__"}
        path = tmp_path / "compiled.py"
        path.write_text(COMPILED)
        if not traced:
            exec(compile(COMPILED, str(path), "exec"), scope)
            return scope, None
        with gradviz.trace(engine="torch") as tr:
            exec(compile(COMPILED, str(path), "exec"), scope)
        return scope, tr.to_dict()

    untraced, _ = run(False)
    traced, doc = run(True)
    assert traced["loss"].item() == untraced["loss"].item()
    assert torch.equal(traced["model"].weight.grad, untraced["model"].weight.grad)
    assert doc["status"]["completed"] and doc["internal_errors"] == []
    # the user's eager ops and one node per compiled call: nothing from inside the compiler
    ops = [(n["op"], n["shape"]) for n in doc["nodes"] if n["op"] != "AccumulateGrad"]
    assert ops == [op for n in (8, 8, 6, 5) for op in
                   (("CompiledFunctionBackward", [n, 2]), ("PowBackward0", [n, 2]), ("MeanBackward0", []))]
    json.dumps(doc, allow_nan=False)  # plain JSON types only (no symbolic size)


def test_a_symbolic_size_in_a_document_is_written_as_its_text():
    """A SymInt that reached a document cost torch 2.4's compiled runs their report.json ("SymInt is not JSON
    serializable"); written as its text, without asking it for a value (no guard added to its compilation)."""
    import io

    import numpy as np
    from torch._dynamo.source import ConstantSource
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv

    from gradviz.document.model import write_json_to

    env = ShapeEnv()
    size = env.create_symintnode(env.create_symbol(16, ConstantSource("n"), dynamic_dim=DimDynamic.DYNAMIC),
                                 hint=16)
    unbacked = env.create_unbacked_symint()  # data-dependent: has no value at all
    out = io.StringIO()
    write_json_to(out, {"shape": [size, unbacked, 4], "count": np.int64(3), "norm": np.float32(0.5)})
    assert json.loads(out.getvalue()) == {"shape": [str(size), "u0", 4], "count": 3, "norm": 0.5}
    assert re.fullmatch(r"s\d+", str(size)) and env.guards == []
    with pytest.raises(TypeError, match="Object of type object is not JSON serializable"):
        write_json_to(io.StringIO(), {"x": object()})


def test_a_cuda_wheel_on_a_machine_without_a_gpu_says_so():
    fake = types.SimpleNamespace(version=types.SimpleNamespace(cuda="13.0", hip=None),
                                 cuda=types.SimpleNamespace(is_available=lambda: False, device_count=lambda: 0))
    assert torch_compat.accelerator(fake) == {"built": "cuda 13.0", "available": False, "devices": 0}
    cpu = types.SimpleNamespace(version=types.SimpleNamespace(cuda=None, hip=None),
                                cuda=types.SimpleNamespace(is_available=lambda: False, device_count=lambda: 0))
    assert torch_compat.accelerator(cpu) == {"built": None, "available": False, "devices": 0}


def test_the_engine_section_reports_this_wheels_accelerator(tmp_path):
    doc = trace(tmp_path, "import torch\nx = torch.ones(2, requires_grad=True) * 2\n")
    built = f"cuda {torch.version.cuda}" if torch.version.cuda else None
    available = torch.cuda.is_available()
    assert doc["engine"]["accelerator"] == {"built": built, "available": available,
                                            "devices": torch.cuda.device_count() if available else 0}
    assert doc["engine"]["devices"] == ["cpu"] and re.match(r"\d+\.\d+", doc["engine"]["version"])


def test_report_json_is_written_in_slices_with_the_bytes_of_one_dumps():
    import io
    import json

    from gradviz.document.model import _SLICE, write_json_to

    nodes = [{"id": i, "op": f"op{i}", "x": [i, 0.5]} for i in range(2 * _SLICE + 7)]
    doc = {"format": "gradviz-trace", "nodes": nodes,
           "empty": [], "exact": list(range(_SLICE)), "text": "é\u2028\"", "nested": {"a": [1.5, None, True]}}
    out = io.StringIO()
    write_json_to(out, doc)
    assert out.getvalue() == json.dumps(doc, separators=(",", ":")) + "\n"
    assert json.loads(out.getvalue()) == doc
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        write_json_to(io.StringIO(), {"nodes": [{"v": 1.0}] * (_SLICE + 1) + [{"v": float("nan")}]})


# ----- light iterations on an older torch's answers --------------------------------------------------------------
LATE = Path(__file__).parent / "late_mistakes"


def test_a_stale_version_on_a_light_iteration_is_traced_to_its_write_where_saved_tensors_only_unpack(force):
    """Torch 2.4 and 2.9 read saved tensors by unpacking them, and a value changed in place no longer unpacks:
    the light watch finds the node that saved it by the error its unpacking raises, so the in-place line and the
    saving node are named at step 53 as where ``SavedTensor.data`` reads it."""
    force(saved="unpack")
    path = LATE / "stale_version_at_53.py"
    doc = traced(path, "torch", light=True)
    (d,) = [d for d in doc["diagnostics"] if d["code"] == "stale-version"]
    assert d["location"]["line"] == marked_line(path, "# MARK")
    assert "SigmoidBackward0" in d["message"] and "`h.mul_(0.5)`" in d["message"]
    assert doc["internal_errors"] == []


def test_a_loss_whose_nodes_change_on_a_light_iteration_is_listed_where_nodes_carry_no_shapes(force):
    """Torch 2.4's nodes carry no output shapes, which a light iteration reads to see a loss-broadcast. A loss
    whose nodes differ from every recorded one (step 77) makes the next iterations full and is listed in
    ``unseen`` with the rerun; a loss whose nodes never change lists nothing."""
    force(node_shapes=False)
    path = LATE / "loss_broadcast_at_77.py"
    doc = traced(path, "torch", light=True)
    (entry,) = [u for u in doc["unseen"] if u["what"].startswith("the shapes in the loss")]
    assert entry["kind"] == "not-recorded"
    assert entry["what"] == ("the shapes in the loss of iteration 77, where an elementwise op meets a value needing "
                             "no gradient as no recorded iteration's loss does (a loss-broadcast there is not seen)")
    assert entry["location"]["line"] == marked_line(path, "loss.backward()")
    assert entry["advice"].startswith("`--trace-steps 77:77` (or `--full`)")
    assert any(r["first"] == 78 and r["why"] == "finding" for r in doc["schedule"]["full"])
    clean = traced(LATE / "clean_300_steps.py", "torch", light=True)
    assert not [u for u in clean["unseen"] if u["what"].startswith("the shapes in the loss")]


def test_a_checkpoint_on_a_torch_without_exact_memory_is_not_sent_to_exact_memory(force):
    """The memory a checkpoint's recompute holds is listed as not measured; where this torch lacks the hooks
    ``--exact-memory`` needs (2.4), the advice says so instead of pointing at that option."""
    force(exact="_top_saved_tensors_default_hooks")
    path = LATE / "checkpointed_block.py"
    doc = traced(path, "torch", light=True)
    (entry,) = [u for u in doc["unseen"] if u["what"].startswith("the memory a checkpointed segment")]
    assert entry["advice"] == (f"torch {torch.__version__} cannot measure it (no _top_saved_tensors_default_hooks)")
    assert entry["location"]["line"] == marked_line(path, "checkpoint(block")
