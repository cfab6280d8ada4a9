"""The PyTorch adapter's mechanisms, each in isolation: the facts it reports to a builder (a fact log here)."""

import gc
import os
import subprocess
import sys
import textwrap
import threading
import warnings
from functools import partial

import pytest

torch = pytest.importorskip("torch")

from gradviz.tracing.adapters.torch import graph as torch_graph  # noqa: E402
from gradviz.tracing.adapters.torch.engine import TorchAdapter  # noqa: E402

from .marked_lines import marked_line  # noqa: E402
from .torch_factlog import FactLog  # noqa: E402

pytestmark = pytest.mark.oracle
HERE = os.path.abspath(__file__)
_line_of = partial(marked_line, HERE)  # a line of this file, by its marker comment


class traced:
    def __enter__(self):
        self.log = FactLog()
        self.adapter = TorchAdapter(self.log)
        self.adapter.attach()
        return self.log

    def __exit__(self, *exc):
        self.adapter.detach()
        self.adapter.finish(None)
        assert not self.log.internal_errors, self.log.internal_errors
        return False


def test_ops_nodes_lines_modules_and_parameter_names():
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    with traced() as log:
        y = model(torch.randn(5, 4))  # model call
        loss = torch.nn.functional.cross_entropy(y, torch.tensor([0, 1, 0, 1, 1]))  # the loss
    ops = log.of("op")
    assert [o["op"] for o in ops] == ["TBackward0", "AddmmBackward0", "ReluBackward0", "TBackward0",
                                      "AddmmBackward0", "LogSoftmaxBackward0", "NllLossBackward0"]
    assert {o["location"].line for o in ops[:5]} == {_line_of("# model call")}
    assert {o["location"].line for o in ops[5:]} == {_line_of("# the loss")}
    assert [m["path"] for m in log.of("module_enter")] == ["model", "model.0", "model.1", "model.2"]
    names = log.of("parameter_names")[0]["names"]
    assert names[id(model[0].weight)] == "model.0.weight" and names[id(model[2].bias)] == "model.2.bias"
    # cross_entropy built two nodes; the second one's edge is the first one
    assert ops[6]["edges"] == [(ops[5]["key"], 0)]
    assert ops[1]["edges"][0] == (id(model[0].bias), "leaf")
    assert loss.grad_fn.metadata[torch_graph.KEY].id == ops[6]["key"]


def test_a_dropped_graph_reports_its_nodes_dead_and_is_not_kept_alive():
    x = torch.randn(3, requires_grad=True)
    with traced() as log:
        y = (x * 2).sin()
        keys = [o["key"] for o in log.of("op")]
        del y
        gc.collect()
        died = [d["key"] for d in log.of("node_died")]
    assert sorted(died) == sorted(keys)


def test_backward_visits_norms_and_frees_without_retain_graph():
    x = torch.randn(4, requires_grad=True)
    with traced() as log:
        y = x.exp()
        z = y.sin()
        loss = z.sum()
        node = z.grad_fn
        loss.backward()
    steps = log.of("backward_step")
    assert [s["node"] for s in steps] == [o["key"] for o in reversed(log.of("op"))]
    expected_sin = torch.ones(4).norm().item()
    assert steps[1]["norm"] == pytest.approx(expected_sin)
    acc = log.of("accumulate")[0]
    assert acc["variable"] == id(x) and acc["norm"] == pytest.approx(x.grad.norm().item())
    assert acc["grad"] == id(x.grad)
    assert [f["node"] for f in log.of("buffers_freed")] == [s["node"] for s in steps]
    assert torch_graph.is_freed(node)  # what PyTorch did, read back: the saved data is gone


def test_retain_graph_frees_nothing():
    x = torch.randn(4, requires_grad=True)
    with traced() as log:
        loss = x.exp().sum()
        loss.backward(retain_graph=True)
    assert log.of("backward_begin")[0]["retain_graph"] is True
    assert log.of("buffers_freed") == []
    assert not torch_graph.is_freed(loss.grad_fn.next_functions[0][0])


def test_saved_tensors_storage_bytes_and_versions():
    x = torch.randn(8, 8, requires_grad=True)
    w = torch.nn.Parameter(torch.randn(8, 8))
    with traced() as log:
        h = x.exp()  # ExpBackward saves its result
        m = h @ w  # MmBackward saves h and w
    exp, mm = log.of("op")
    (saved,) = exp["saved"]
    assert saved.kind == "output" and saved.nbytes == 256 and saved.block_bytes == 256 and saved.version == 0
    by_var = {s.variable: s for s in mm["saved"]}
    assert by_var[id(h)].block == saved.block  # one block of memory, charged once
    assert by_var[id(w)].block is None  # a parameter's storage is the model's
    assert m.grad_fn is not None


def test_inplace_on_a_saved_tensor_is_reported_with_its_storage_and_versions():
    x = torch.randn(3, requires_grad=True)
    with traced() as log:
        h = x.exp()
        y = h.sin()
        h.add_(1)  # the in-place line
    (event,) = log.of("inplace")
    saved = log.of("op")[1]["saved"][0]  # SinBackward saved h at version 0
    assert event["variable"] == id(h) and (event["old_version"], event["new_version"]) == (0, 1)
    assert event["counter"] == saved.counter and saved.version == 0
    assert event["location"].line == _line_of("# the in-place line")
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()  # PyTorch's own error is intact


def test_inplace_through_data_has_its_own_version_counter():
    x = torch.randn(3, requires_grad=True)
    with traced() as log:
        h = x.exp()
        h.sin()
        h.data.mul_(2)
    (event,) = log.of("inplace")
    assert event["counter"] is None  # not a stale-version case: PyTorch will not notice


def test_nonleaf_grad_read_warns_at_the_users_line():
    x = torch.randn(3, requires_grad=True)
    with traced() as log:
        y = x * 2
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert y.grad is None  # the non-leaf read
    (read,) = log.of("grad_read")
    assert read["was_none"] and not read["is_leaf"] and read["name"] == "y"
    (w,) = [w for w in caught if "not a leaf Tensor" in str(w.message)]
    assert (w.filename, w.lineno) == (HERE, _line_of("# the non-leaf read"))


def test_optimizer_reads_and_writes_of_grad_are_not_the_users():
    model = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with traced() as log:
        model(torch.randn(3, 2)).sum().backward()
        opt.step()
        opt.zero_grad()
    assert log.of("grad_read") == [] and log.of("grad_write") == []
    assert [e["event"] for e in log.of("optimizer")] == ["step", "zero_grad"]
    assert {u["variable"] for u in log.of("parameter_update")} == {id(model.weight), id(model.bias)}


def test_cuts_and_hooks():
    x = torch.randn(3, requires_grad=True)
    calls = []
    with traced() as log:
        y = x * 2
        d = y.detach()
        v = y.sum().item()
        y.register_hook(lambda g: calls.append(g) or g * 2)
        y.retain_grad()
        y.sum().backward()
    assert [c["how"] for c in log.of("cut")] == ["detach", "item"]
    assert log.of("cut")[0]["result"] == id(d) and isinstance(v, float)
    events = [(h["event"], h.get("retain_grad", False)) for h in log.of("hook")]
    assert events == [("register", False), ("register", True), ("call", False)]
    assert len(calls) == 1 and torch.equal(x.grad, torch.full((3,), 4.0))  # the hook's result still counts


class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


def test_custom_function_node_gets_its_own_line():
    x = torch.randn(3, requires_grad=True)
    with traced() as log:
        s = Square.apply(x)  # the custom Function
        (s + 1).sum()
    ops = {o["op"]: o for o in log.of("op")}
    assert ops["SquareBackward"]["location"].line == _line_of("# the custom Function")
    assert ops["SquareBackward"]["custom"] and ops["SquareBackward"]["class_name"] == "Square"


def test_compiled_function_gives_the_same_results_traced_and_untraced():
    f = torch.compile(lambda x: (x.sin() * 2).sum(), backend="aot_eager")  # compiled before the trace
    x = torch.randn(5, requires_grad=True)
    expected = f(x)
    expected.backward()
    grad = x.grad.clone()
    x.grad = None
    with traced() as log:
        got = f(x)
        got.backward()
    assert got.shape == () and torch.equal(got, expected) and torch.equal(x.grad, grad)
    # compiled again under the trace: torch 2.4's compiled region calls the Function.apply it found when it was
    # compiled, so one compiled before the trace started is met only at backward, without its line
    with traced() as log:
        f = torch.compile(lambda x: (x.sin() * 2).sum(), backend="aot_eager")  # the compiled code
        f(x).backward()
    (op,) = log.of("op")
    # the compiled region is one node, at the line of the code that was compiled (its frame is the user's)
    assert op["op"] == "CompiledFunctionBackward" and op["location"].line == _line_of("# the compiled code")
    (unseen,) = log.of("unseen")  # what the trace did not see inside the region is said, at the region's line
    assert unseen["kind"] == "compiled-region" and unseen["what"] == "ops inside a torch.compile region"
    assert unseen["location"].line == _line_of("# the compiled code")


def test_user_threads_are_observed_and_the_mode_leaves_every_stack():
    x = torch.randn(3, requires_grad=True)
    results = {}

    def work():
        results["y"] = (x * 3).sum()  # in the thread
        results["stack"] = torch._C._len_torch_function_stack()

    with traced() as log:
        t = threading.Thread(target=work)
        t.start()
        t.join()
    assert results["stack"] == 1
    assert [o["location"].line for o in log.of("op")] == [_line_of("# in the thread")] * 2
    assert torch._C._len_torch_function_stack() == 0


def test_stop_removes_the_mode_from_under_a_later_one():
    from torch.overrides import TorchFunctionMode

    class Other(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    log = FactLog()
    adapter = TorchAdapter(log)
    adapter.attach()
    other = Other()
    other.__enter__()
    adapter.detach()
    assert torch._C._len_torch_function_stack() == 1
    other.__exit__(None, None, None)
    assert torch._C._len_torch_function_stack() == 0


def test_pytorch_errors_pass_through_unchanged():
    a, b = torch.randn(2, 3), torch.randn(4, 5)
    with pytest.raises(RuntimeError) as untraced:
        a @ b
    with traced():
        with pytest.raises(RuntimeError) as under_trace:
            a @ b
    assert str(under_trace.value) == str(untraced.value)


def test_backward_errors_are_classified():
    x = torch.randn(3, requires_grad=True)
    with traced() as log:
        with pytest.raises(RuntimeError, match="scalar outputs"):
            (x * 2).backward()
        loss = x.exp().sum()
        loss.backward()
        with pytest.raises(RuntimeError, match="second time"):
            loss.backward()
    errors = [e["error"] for e in log.of("backward_end") if e["error"]]
    assert [e["code"] for e in errors] == ["nonscalar-backward", "graph-freed"]
    assert log.of("backward_begin")[0]["retain_graph"] is None  # refused before it started


def _run(script):
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(HERE)))
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env)


def test_dataloader_workers_fork_and_record_nothing(tmp_path):
    script = tmp_path / "loader.py"
    script.write_text(textwrap.dedent("""
        import sys
        import torch
        from torch.utils.data import DataLoader, TensorDataset
        from tests.torch_factlog import FactLog
        from gradviz.tracing.adapters.torch.engine import TorchAdapter

        data = TensorDataset(torch.arange(16.).reshape(8, 2), torch.arange(8))
        expected = [b[0].sum().item() for b in DataLoader(data, batch_size=2, num_workers=2)]
        log = FactLog()
        adapter = TorchAdapter(log)
        adapter.attach()
        w = torch.randn(2, requires_grad=True)
        got = []
        for xb, yb in DataLoader(data, batch_size=2, num_workers=2):
            got.append(xb.sum().item())
            (xb @ w).sum().backward()
        adapter.detach()
        assert got == expected, (got, expected)
        assert len(log.of("backward_begin")) == 4 and not log.internal_errors
        print("ok")
    """))
    out = _run(script)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_a_thread_still_running_at_exit_does_not_abort_the_process(tmp_path):
    script = tmp_path / "threads.py"
    script.write_text(textwrap.dedent("""
        import sys, threading, time
        import torch
        from tests.torch_factlog import FactLog
        from gradviz.tracing.adapters.torch.engine import TorchAdapter

        adapter = TorchAdapter(FactLog())
        adapter.attach()
        stop = threading.Event()
        def spin():
            x = torch.randn(3, requires_grad=True)
            while not stop.is_set():
                (x * 2).sum()
        t = threading.Thread(target=spin, daemon=True)
        t.start()
        time.sleep(0.2)
        adapter.detach()
        time.sleep(0.1)
        stop.set()
        t.join()
        print("done")
    """))
    out = _run(script)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "done"


def test_an_older_torch_is_one_line():
    from types import SimpleNamespace

    from gradviz.tracing.adapters.torch.engine import TorchVersionError, check_version

    check_version(SimpleNamespace(__version__="2.13.0+cpu"))
    check_version(SimpleNamespace(__version__="2.4.0"))
    with pytest.raises(TorchVersionError) as err:
        check_version(SimpleNamespace(__version__="2.1.2+cu118"))
    assert str(err.value) == ("gradviz's torch engine needs torch 2.4 or later, found torch 2.1.2+cu118: "
                              "pip install 'torch>=2.4,<=2.15.0'")


def test_engine_torch_without_pytorch_is_one_line(monkeypatch):
    import gradviz

    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` fails as if it were not installed
    with pytest.raises(ImportError) as err:
        gradviz.trace(engine="torch")
    assert str(err.value) == "engine='torch' needs PyTorch, which is not installed: pip install 'gradviz[torch]'"


def test_auto_watches_pytorch_imported_during_the_block(tmp_path):
    """engine="auto" (the default): gradviz's engine, and real PyTorch from the moment it is imported."""
    script = tmp_path / "auto.py"
    script.write_text(textwrap.dedent("""
        import sys
        import gradviz
        assert "torch" not in sys.modules
        with gradviz.trace() as tr:
            g = (gradviz.randn(3, requires_grad=True) * 2).sum()
            import torch
            t = (torch.randn(3, requires_grad=True) * 2).sum()
            t.backward()
        doc = tr.to_dict()
        ops = sorted({n["op"] for n in doc["nodes"]})
        print(doc["engine"]["name"], [e["name"] for e in doc["engine"].get("engines", [])], ops)
        print(torch._C._len_torch_function_stack())
    """))
    out = _run(script)
    assert out.returncode == 0, out.stderr
    first, second = out.stdout.strip().splitlines()
    assert first == ("gradviz ['gradviz', 'torch'] ['AccumulateGrad', 'MulBackward', 'MulBackward0', "
                     "'SumBackward', 'SumBackward0']")
    assert second == "0"


def test_threads_running_modules_at_once_keep_their_own_module_stacks():
    import gradviz

    torch.manual_seed(0)
    first, second = torch.nn.Linear(3, 3), torch.nn.Linear(3, 3)
    x = torch.randn(2, 3)
    barrier = threading.Barrier(2)

    def work_first():
        barrier.wait()
        for _ in range(30):
            first(x).sum().backward()

    def work_second():
        barrier.wait()
        for _ in range(30):
            second(x).sum().backward()

    with gradviz.trace(engine="torch") as tr:
        threads = [threading.Thread(target=work) for work in (work_first, work_second)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    doc = tr.to_dict()
    assert not doc["internal_errors"]
    stacks = {tuple(n["module"]) for n in doc["nodes"] if n["op"] == "AddmmBackward0"}
    assert stacks <= {("first",), ("second",)} and len(stacks) == 2, stacks


def test_stop_from_another_thread_leaves_no_mode_behind():
    import gradviz

    tr = gradviz.trace(engine="torch")
    with tr:
        (torch.ones(2, requires_grad=True) * 2).sum().backward()
        stopper = threading.Thread(target=tr.stop)
        stopper.start()
        stopper.join()
        assert torch._C._len_torch_function_stack() == 1  # this thread's mode: only this thread can pop it
        (torch.ones(2) * 3).sum()  # passes through it, unrecorded
    assert torch._C._len_torch_function_stack() == 0  # the block's exit took it off
    assert len(tr.to_dict()["backwards"]) == 1
