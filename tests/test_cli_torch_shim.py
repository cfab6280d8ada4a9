"""``--torch``: PyTorch's module names resolve to gradviz for one run, and nothing else does silently."""

import inspect
import sys
import textwrap
from pathlib import Path

import pytest

import gradviz
from gradviz.cli import torch_shim
from gradviz.cli.runner import compile_script, run_code
from gradviz.cli.torch_shim import TorchNameNotSupported, TorchShim, UnsupportedTorchAttribute, UnsupportedTorchModule

NOT_SUPPORTED = "is not supported by gradviz's engine; `gradviz supported torch` lists the supported names"

ROOT = Path(__file__).resolve().parent.parent


def torch_entries():
    return {name: module for name, module in sys.modules.items() if name == "torch" or name.startswith("torch.")}


def test_torch_names_resolve_to_gradviz_inside_and_not_after():
    before = torch_entries()
    meta_path = list(sys.meta_path)
    with TorchShim():
        import torch
        from torch.autograd import Variable

        assert Variable is gradviz.Variable
        assert torch.Tensor is gradviz.Tensor
        assert inspect.unwrap(torch.randn) is gradviz.randn  # wrapped only to take out= (gradviz/out_arg.py)
        assert torch.autograd.grad is gradviz.autograd.grad
        x = torch.ones(2, requires_grad=True)
        (x * 3).sum().backward()
        assert x.grad.tolist() == [3.0, 3.0]
    assert torch_entries() == before
    assert sys.meta_path == meta_path


def test_the_shim_wins_over_an_installed_pytorch():
    real = pytest.importorskip("torch")
    with TorchShim():
        import torch as shimmed

        assert shimmed is not real
        assert inspect.unwrap(shimmed.ones) is gradviz.ones
    import torch as after

    assert after is real


def test_everything_is_restored_when_the_body_raises():
    before = torch_entries()
    with pytest.raises(ZeroDivisionError):
        with TorchShim():
            import torch  # noqa: F401

            raise ZeroDivisionError
    assert torch_entries() == before
    assert not any(isinstance(f, TorchShim) for f in sys.meta_path)


def test_unknown_attribute_names_itself_and_keeps_hasattr_working():
    with TorchShim():
        import torch

        assert not hasattr(torch, "fft")
        with pytest.raises(UnsupportedTorchAttribute) as info:
            torch.fft.fft(torch.ones(2))
        with pytest.raises(UnsupportedTorchAttribute) as near:
            torch.nn.Linaer(2, 2)
    assert str(info.value) == f"`torch.fft` {NOT_SUPPORTED}"
    assert isinstance(info.value, AttributeError) and isinstance(info.value, TorchNameNotSupported)
    # the closest supported name, and the command listing that module's names (never a repository path)
    assert str(near.value) == ("`torch.nn.Linaer` is not supported by gradviz's engine; did you mean "
                               "`torch.nn.Linear`? `gradviz supported torch.nn` lists the supported names")


def test_unknown_module_import_names_itself():
    with TorchShim():
        with pytest.raises(UnsupportedTorchModule) as info:
            import torch.fft  # noqa: F401
        with pytest.raises(ImportError) as from_info:
            from torch import distributions  # noqa: F401
    assert str(info.value) == f"`torch.fft` {NOT_SUPPORTED}"
    assert "`torch.distributions` is not supported" in str(from_info.value)


def test_names_are_derived_from_gradviz_namespaces_not_a_list(monkeypatch):
    # ops the top-level namespace has (gradviz.functions) are behind the shim without being listed anywhere
    names = torch_shim.exposed_names("torch")
    for name in ("sin", "cat", "where", "is_tensor", "numel", "device", "save", "load", "Generator",
                 "LongTensor", "set_default_dtype", "cuda", "utils"):
        assert name in names
    # a layer another part of gradviz adds appears at once, at its PyTorch place
    layer = type("Bilinear", (gradviz.nn.Module,), {"__module__": "gradviz.nn.modules.linear"})
    monkeypatch.setattr(gradviz.nn, "Bilinear", layer, raising=False)
    assert "Bilinear" in torch_shim.exposed_names("torch.nn")
    assert "torch.nn.Bilinear" in torch_shim.supported_names("torch.nn.B")
    # engine helpers a module imports for itself are not its PyTorch names
    assert "Variable" not in torch_shim.exposed_names("torch.nn.functional")
    assert "as_device" not in torch_shim.exposed_names("torch.cuda")


def test_process_level_modules_resolve_under_the_shim():
    with TorchShim():
        import torch
        import torch.backends.mps
        from torch.utils.data import DataLoader, TensorDataset

        assert torch.cuda.is_available() is False and torch.cuda.device_count() == 0
        assert torch.accelerator.is_available() is False and torch.accelerator.current_accelerator() is None
        assert torch.backends.mps.is_available() is False
        assert DataLoader is gradviz.utils.data.DataLoader and TensorDataset is gradviz.utils.data.TensorDataset
        assert torch.device("cpu") == gradviz.device("cpu")


def test_gradviz_only_names_are_not_exposed_as_torch_names():
    # torch.trace is a matrix trace in PyTorch: behind the shim it is the engine's, never gradviz's tracer
    names = torch_shim.exposed_names("torch")
    for name in ("load_trace", "explain", "render", "Function", "Variable", "errors", "ops"):
        assert name not in names
    with TorchShim():
        import torch

        assert inspect.unwrap(torch.trace) is gradviz.ops.linalg.trace
        assert torch.trace(torch.eye(3) * 2).item() == 6.0
        with pytest.raises(UnsupportedTorchAttribute, match="`torch.load_trace` is not supported"):
            torch.load_trace  # noqa: B018
        assert torch.autograd.Function is gradviz.Function
    assert callable(gradviz.trace().__enter__)  # gradviz's own name is still the tracer


def test_script_run_under_the_shim_sees_gradviz(tmp_path, capsys):
    path = tmp_path / "uses_torch.py"
    path.write_text(textwrap.dedent("""
        import torch
        from torch.autograd import Variable
        x = Variable(torch.ones(2, 2), requires_grad=True)
        y = (x * x).sum()
        y.backward()
        print(type(x).__module__, x.grad.tolist())
    """))
    with TorchShim():
        result = run_code(compile_script(str(path)), str(path))
    assert result.exit_code == 0, result.traceback
    assert capsys.readouterr().out == "gradviz.autograd.variable [[2.0, 2.0], [2.0, 2.0]]\n"


def test_docs_list_of_supported_names_matches_the_shim():
    text = (ROOT / "docs" / "api.md").read_text()
    assert "## Supported PyTorch names" in text
    start = text.index(torch_shim.BEGIN_MARK) + len(torch_shim.BEGIN_MARK)
    generated = text[start:text.index(torch_shim.END_MARK)].strip()
    assert generated == torch_shim.supported_names_markdown().strip(), (
        "docs/api.md is out of date: run `python -m gradviz.cli.torch_shim docs/api.md`")


def test_every_mirrored_module_is_listed_in_the_docs():
    text = (ROOT / "docs" / "api.md").read_text()
    for module in torch_shim.available_modules():
        assert f"### `{module}`" in text


def test_every_top_level_op_and_functional_form_is_exposed():
    # nothing gradviz defines as a torch-namespace function or functional form is left out by the derivation
    import types

    import gradviz.functions
    import gradviz.nn.functional

    for module, torch_name, skip in ((gradviz.functions, "torch", {"Variable"}),
                                     (gradviz.nn.functional, "torch.nn.functional", set())):
        exposed = set(torch_shim.exposed_names(torch_name))
        own = {n for n in dir(module) if not n.startswith("_") and n not in skip
               and not isinstance(getattr(module, n), types.ModuleType)
               and getattr(getattr(module, n), "__module__", "") == module.__name__}
        assert own and own <= exposed, sorted(own - exposed)
