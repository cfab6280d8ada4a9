"""Every name the ``--torch`` shim exposes is a real PyTorch name at the same place (no gradviz-only leaks)."""

import importlib

import pytest

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.oracle

from gradviz.cli.torch_shim import available_modules, exposed_names, tensor_methods  # noqa: E402


@pytest.mark.parametrize("module_name", available_modules())
def test_exposed_names_exist_in_pytorch(module_name):
    real = importlib.import_module(module_name)
    missing = [name for name in exposed_names(module_name) if not hasattr(real, name)]
    assert missing == []


def test_tensor_methods_exist_in_pytorch():
    assert [name for name in tensor_methods() if not hasattr(torch.Tensor, name)] == []
    assert [name for name in tensor_methods(extras=True) if hasattr(torch.Tensor, name)] == []
