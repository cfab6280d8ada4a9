"""The torch adapter's speed-ups change nothing the user sees: torch's hook registration is swapped only while a
trace is attached and only for the adapter's own hooks, the mode is back on the stack after an optimizer step,
and the batched NaN/Inf check flags exactly the outputs that hold NaN/Inf."""

import pytest

torch = pytest.importorskip("torch")

import gradviz  # noqa: E402

pytestmark = pytest.mark.oracle


def _register_hook():
    return torch.autograd.function._HookMixin.__dict__["_register_hook"]


def test_hook_registration_swapped_only_while_attached_and_user_hooks_keep_their_handles():
    original = _register_hook()
    x = torch.ones(3, requires_grad=True)
    calls = []
    with gradviz.trace(engine="torch"):
        assert _register_hook() is not original
        y = (x * 2).sum()
        handle = y.grad_fn.register_prehook(lambda grads: calls.append("removed"))
        assert type(handle).__name__ == "RemovableHandle"
        handle.remove()
        y.grad_fn.register_prehook(lambda grads: calls.append(float(grads[0])))
        y.backward()
    assert _register_hook() is original
    assert calls == [1.0]
    assert x.grad.tolist() == [2.0, 2.0, 2.0]


def test_ops_after_an_optimizer_step_and_zero_grad_are_still_seen():
    w = torch.nn.Parameter(torch.ones(2))
    opt = torch.optim.SGD([w], lr=0.1)
    with gradviz.trace(engine="torch") as tr:
        depth = torch._C._len_torch_function_stack()
        (w * 3).sum().backward()
        opt.step()
        assert torch._C._len_torch_function_stack() == depth
        opt.zero_grad()
        assert torch._C._len_torch_function_stack() == depth
        after = (w.tanh() * 2).sum()  # line: after the step
    doc = tr.to_dict()
    line = next(i for i, text in enumerate(open(__file__), 1) if "# line: after the step" in text)
    ops = sorted(n["op"] for n in doc["nodes"] if (n.get("location") or {}).get("line") == line)
    assert ops == ["MulBackward0", "SumBackward0", "TanhBackward0"]
    assert after.item() == pytest.approx(2 * 2 * float(torch.tanh(torch.tensor(0.7))))


def test_batched_nonfinite_check_flags_only_outputs_holding_nan_or_inf():
    x = torch.tensor([1.0, -1.0, 2.0], requires_grad=True)
    big = torch.full((3,), 3e38, requires_grad=True)
    with gradviz.trace(engine="torch") as tr:
        shifted = big + 0.0  # finite values whose sum overflows: not a NaN/Inf output
        total = shifted.sum()  # inf
        y = x.log()  # NaN at index 1
        (y * 2).sum().backward()
    flagged = {n["op"] for n in tr.to_dict()["nodes"] if n.get("nonfinite")}
    assert "AddBackward0" not in flagged
    assert {"LogBackward0", "SumBackward0"} <= flagged
    assert not bool(torch.isfinite(total))


def test_profiler_marks_skip_the_op_path_and_ops_inside_them_are_still_seen(monkeypatch):
    from gradviz.tracing.adapters.torch.engine import TorchAdapter

    seen = []
    op = TorchAdapter.op

    def counting(self, func, args, kwargs):
        seen.append(getattr(func, "__name__", str(func)))
        return op(self, func, args, kwargs)

    monkeypatch.setattr(TorchAdapter, "op", counting)
    w = torch.nn.Parameter(torch.ones(2))
    opt = torch.optim.SGD([w], lr=0.1)  # its step runs inside record_function
    with gradviz.trace(engine="torch") as tr:
        with torch.autograd.profiler.record_function("user-region"):
            y = (w * 3).sum()
        y.backward()
        opt.step()
    assert not any("record_function" in name for name in seen)
    assert "mul" in seen or "__mul__" in seen
    doc = tr.to_dict()
    assert not doc.get("internal_errors")
    ops = [n.get("op") for n in doc["nodes"]]
    assert "MulBackward0" in ops and "SumBackward0" in ops


def _linear_calls():
    """Linear layers on every path the two-node fast path takes or declines: with and without bias, an input
    that needs no gradient or does, a weight seen the first time (its accumulator untagged) and again, the
    functional form with a keyword bias, a weight used twice in one call."""
    torch.manual_seed(0)
    first = torch.nn.Linear(4, 3)
    second = torch.nn.Linear(3, 2, bias=False)
    square = torch.nn.Parameter(torch.randn(4, 4))
    with gradviz.trace(engine="torch") as tr:
        for _ in range(3):
            x = torch.randn(5, 4)
            xr = torch.randn(5, 4, requires_grad=True)
            y = second(torch.relu(first(x))) + first(xr)[:, :2]  # line: linear calls
            z = torch.nn.functional.linear(x, first.weight, bias=first.bias)
            w = torch.nn.functional.linear(x @ square, square)
            (y.sum() + z.sum() + w.sum()).backward()
    return tr.to_dict()


def test_a_linear_call_records_its_matmul_and_the_weight_s_transpose_at_its_line():
    doc = _linear_calls()
    line = next(i for i, text in enumerate(open(__file__), 1) if "# line: linear calls" in text)
    ops = sorted(n["op"] for n in doc["nodes"]
                 if (n.get("location") or {}).get("line") == line and n.get("iteration") == 1)
    assert ops == _untraced_line_nodes()
    assert ops.count("TBackward0") == 3 and ops.count("AddmmBackward0") == 2 and "MmBackward0" in ops


def _untraced_line_nodes():
    """The nodes PyTorch itself builds for the linear-calls line, untraced: ``[:, :2]`` is one SliceBackward0 on
    2.13 and two on 2.4 (which keeps the whole-range slice of dim 0), so the expected list is read, not typed.
    Each node is kept alive while counted (a dead node's id can be another's)."""
    torch.manual_seed(0)
    first = torch.nn.Linear(4, 3)
    second = torch.nn.Linear(3, 2, bias=False)
    y = second(torch.relu(first(torch.randn(5, 4)))) + first(torch.randn(5, 4, requires_grad=True))[:, :2]
    seen, kept, stack = set(), [], [y.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        kept.append(node)
        stack.extend(child for child, _ in node.next_functions)
    return sorted(type(n).__name__ for n in kept if type(n).__name__ != "AccumulateGrad")


def _scalar_and_index_calls():
    """Roots whose inputs are their arguments in order plus a scalar's empty input (``y * 2``), or plus
    arguments that feed none (``gather``'s index), next to calls the alignment must decide (a mask first)."""
    torch.manual_seed(0)
    x = torch.randn(4, 3, requires_grad=True)
    index = torch.tensor([[0], [2], [1], [0]])
    mask = torch.tensor([True, False, True])
    with gradviz.trace(engine="torch") as tr:
        for _ in range(2):
            y = (x * 2 + 1) / 3 - 0.5  # line: scalar operands
            picked = y.gather(1, index)
            both = torch.where(mask, y, x)
            (picked.sum() + both.pow(2).sum() + (x - y).sum()).backward()
    return tr.to_dict()


def test_inputs_in_argument_order_found_without_the_alignment_are_the_alignments(monkeypatch):
    import json

    from gradviz.tracing.adapters.torch.engine import TorchAdapter

    shortcut = _scalar_and_index_calls()
    monkeypatch.setattr(TorchAdapter, "_in_order", lambda *args: None)
    aligned = _scalar_and_index_calls()
    assert json.dumps(shortcut, sort_keys=True) == json.dumps(aligned, sort_keys=True)
    by_op = {n["op"]: n for n in shortcut["nodes"] if n.get("iteration") == 0}
    variables = {v["id"]: v for v in shortcut["variables"]}
    # the scalar's input is an empty slot, the index an argument after the inputs
    assert [i is None for i in by_op["MulBackward0"]["input_variables"]] == [False, True]
    assert [variables[i]["shape"] for i in by_op["GatherBackward0"]["input_variables"]] == [[4, 3], [4, 1]]


def test_a_call_s_arguments_are_not_kept_alive_by_the_trace():
    x = torch.randn(3, requires_grad=True)
    mask = torch.tensor([True, False, True])
    with gradviz.trace(engine="torch") as tr:
        # the mask comes first and feeds no input: the alignment decides; then nothing refers to x * 2 or y
        y = torch.where(mask, x * 2, x)
        del y
    graphs = tr.to_dict()["graphs"]
    assert [g["alive_at_end"] for g in graphs] == [False]
