"""Module calls while the tracing thread is light go through a wrapper of ``nn.Module.__call__`` (no global module
hook): another thread, which stays full, still has its module calls recorded, and a module's own hooks, keyword
arguments and exceptions are the module's as without a trace."""

import threading

import pytest

import gradviz

torch = pytest.importorskip("torch")


class Scale(torch.nn.Module):
    def forward(self, x, factor=1.0):
        if factor == 0:
            raise ValueError("factor 0")
        return x * factor


def _go_light(model, opt, x, steps=4):
    for _ in range(steps):
        opt.zero_grad()
        model(x).pow(2).sum().backward()
        opt.step()


def test_another_threads_module_calls_get_the_full_hooks_work_while_this_thread_is_light():
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(2, 3)
    worker_model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh())
    calls = []
    with gradviz.trace(engine="torch", light=True, trace_steps=(1, 1)) as tr:
        adapter = tr.adapters[0]
        _go_light(model, opt, x)
        assert adapter.light_steps.on
        enter, leave = adapter.module_enter, adapter.module_exit
        main = threading.get_ident()

        def spied(kind, hook):
            def call(module, *args):
                calls.append((kind, threading.get_ident() == main, type(module).__name__))
                return hook(module, *args)
            return call

        adapter.module_enter, adapter.module_exit = spied("enter", enter), spied("exit", leave)
        worker = threading.Thread(target=lambda: worker_model(x).sum().backward())
        worker.start()
        worker.join()
        model(x)  # this thread, light: noted for the signature only
        del adapter.module_enter, adapter.module_exit
        assert adapter.tls.calls in (None, [])  # (this thread's: nothing was left open)
    assert calls == [("enter", False, "Sequential"), ("enter", False, "Linear"), ("exit", False, "Linear"),
                     ("enter", False, "Tanh"), ("exit", False, "Tanh"), ("exit", False, "Sequential")]


def test_a_modules_hooks_keywords_and_errors_are_its_own_on_a_light_iteration():
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(2, 3)
    scale = Scale()
    seen = []
    scale.register_forward_hook(lambda m, args, kwargs, out: seen.append((kwargs, out.shape)), with_kwargs=True)
    with gradviz.trace(engine="torch", light=True, trace_steps=(1, 1)) as tr:
        _go_light(model, opt, x)
        light = tr.adapters[0].light_steps
        assert light.on
        out = scale(x, factor=3.0)
        with pytest.raises(ValueError, match="factor 0"):
            scale(x, factor=0)
        assert light.on  # the error was the module's: nothing of ours changed
    assert torch.equal(out, x * 3.0)
    assert seen == [({"factor": 3.0}, torch.Size([2, 3]))]


def test_the_mode_watch_decides_a_frame_once_on_light_iterations(monkeypatch):
    """A mode-dependent module (Dropout) opens a run on every iteration, whose line the mode watch finds by walking
    out to the training loop: each frame's code is decided once (its path check is a few µs), not on each walk."""
    import os

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Dropout(0.5), torch.nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(2, 3)
    with gradviz.trace(engine="torch", light=True, trace_steps=(1, 1)) as tr:
        _go_light(model, opt, x)
        assert tr.adapters[0].light_steps.on
        checked = []
        abspath = os.path.abspath
        monkeypatch.setattr(os.path, "abspath", lambda path: checked.append(path) or abspath(path))
        _go_light(model, opt, x, steps=3)
        monkeypatch.undo()
    assert checked == []
    [run] = [m for m in tr.to_dict()["training"]["modules"] if m["class"] == "Dropout"][0]["runs"]
    assert run["count"] == 7 and run["first"]["location"]["function"] == "_go_light"
