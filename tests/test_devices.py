"""Devices and process-level names (CPU only): torch.device, device= on factories, .to/.cpu/.cuda, the default
dtype and device, Generator, the legacy constructors — compared with torch 2.13 where it is installed."""

import numpy as np
import pytest

import gradviz as gv
from gradviz.errors import DeviceError

FACTORIES = [
    lambda **kw: gv.tensor([1.0, 2.0], **kw), lambda **kw: gv.as_tensor([1, 2], **kw),
    lambda **kw: gv.zeros(2, 3, **kw), lambda **kw: gv.ones(2, **kw), lambda **kw: gv.empty(2, **kw),
    lambda **kw: gv.full((2,), 1.5, **kw), lambda **kw: gv.zeros_like(gv.ones(2), **kw),
    lambda **kw: gv.ones_like(gv.ones(2), **kw), lambda **kw: gv.full_like(gv.ones(2), 3, **kw),
    lambda **kw: gv.eye(2, **kw), lambda **kw: gv.arange(3, **kw), lambda **kw: gv.linspace(0, 1, 3, **kw),
    lambda **kw: gv.rand(2, **kw), lambda **kw: gv.randn(2, **kw), lambda **kw: gv.randint(0, 5, (2,), **kw),
    lambda **kw: gv.randperm(4, **kw), lambda **kw: gv.Tensor(2, 3, **kw),
]


@pytest.mark.parametrize("factory", FACTORIES)
def test_every_factory_takes_a_cpu_device_and_refuses_cuda(factory):
    for device in ("cpu", "cpu:0", gv.device("cpu"), None):
        assert factory(device=device).device == gv.device("cpu")
    with pytest.raises(DeviceError) as info:
        factory(device="cuda")
    assert str(info.value) == "Torch not compiled with CUDA enabled: gradviz's engine runs on the CPU only " \
                              "(device `cuda`)"
    with pytest.raises(DeviceError, match="^PyTorch is not linked with support for mps devices: gradviz's engine"):
        factory(device=gv.device("mps"))


def test_device_objects():
    d = gv.device("cpu:0")
    assert (d.type, d.index, str(d), repr(d)) == ("cpu", 0, "cpu:0", "device(type='cpu', index=0)")
    assert gv.device("cpu") != d and gv.device("cpu", 0) == d and gv.device(d) == d
    assert hash(gv.device("cpu", 0)) == hash(d) and repr(gv.device("cpu")) == "device(type='cpu')"
    cuda = gv.device("cuda", 1)  # a CUDA device object can be made and printed; using it is what fails
    assert (cuda.type, cuda.index, str(cuda)) == ("cuda", 1, "cuda:1")
    assert gv.ones(1).device == gv.device("cpu") and gv.ones(1).device != "cpu"  # PyTorch: no str equality
    for bad, error, message in (("gpu", RuntimeError, "Expected one of cpu, cuda, "),
                                ("cpu:x", RuntimeError, "Invalid device string: 'cpu:x'"),
                                (("cpu", -1), RuntimeError, "Device index must not be negative"),
                                (("cpu:0", 1), RuntimeError, "type (string) must not include an index")):
        with pytest.raises(error) as info:
            gv.device(*(bad if isinstance(bad, tuple) else (bad,)))
        assert str(info.value).startswith(message)


def test_to_forms_and_cpu_and_cuda():
    x = gv.ones(2, requires_grad=True)
    assert x.to("cpu") is x and x.to(gv.device("cpu")) is x and x.cpu() is x and x.to(gv.float32) is x
    y = x.to(gv.float64)
    assert y.dtype == gv.float64 and y.grad_fn is not None  # a differentiable cast, as in PyTorch
    assert x.to(gv.ones(1, dtype=gv.int64)).dtype == gv.int64
    assert x.to("cpu", gv.int32).dtype == gv.int32 and x.to(device="cpu", dtype=gv.float64).dtype == gv.float64
    copied = x.to("cpu", copy=True)
    assert copied is not x and copied.tolist() == [1.0, 1.0]
    with pytest.raises(DeviceError, match="^Torch not compiled with CUDA enabled"):
        x.cuda()
    with pytest.raises(DeviceError, match="device `cuda:0`"):
        x.to("cuda:0")
    assert isinstance(DeviceError("m"), AssertionError) and isinstance(DeviceError("m"), RuntimeError)


def test_cuda_accelerator_and_mps_report_no_gpu():
    assert gv.cuda.is_available() is False and gv.cuda.device_count() == 0 and gv.cuda.is_initialized() is False
    gv.cuda.manual_seed(0), gv.cuda.manual_seed_all(0), gv.cuda.empty_cache()  # no-ops without CUDA, as torch
    with pytest.raises(DeviceError, match="^Torch not compiled with CUDA enabled"):
        gv.cuda.current_device()
    assert gv.accelerator.is_available() is False and gv.accelerator.current_accelerator() is None
    assert gv.accelerator.device_count() == 0
    assert gv.backends.mps.is_available() is False and gv.backends.mps.is_built() is False


def test_default_device_is_the_cpu_only():
    gv.set_default_device("cpu")
    assert gv.get_default_device() == gv.device("cpu")
    gv.set_default_device(None)
    with pytest.raises(DeviceError, match="^Torch not compiled with CUDA enabled"):
        gv.set_default_device("cuda")
    assert gv.get_default_device() == gv.device("cpu")


@pytest.fixture
def float64_default():
    gv.set_default_dtype(gv.float64)
    yield
    gv.set_default_dtype(gv.float32)


def test_default_dtype_changes_what_floats_become(float64_default):
    import gradviz.nn as nn

    assert gv.get_default_dtype() == gv.float64
    for t in (gv.tensor([1.5]), gv.zeros(2), gv.randn(2), gv.arange(0.0, 1.0, 0.5), gv.full((1,), 2.0),
              gv.Tensor(2), gv.Tensor([1, 2]), gv.linspace(0, 1, 3), nn.Linear(2, 2).weight):
        assert t.dtype == gv.float64
    assert gv.tensor([1, 2]).dtype == gv.int64 and gv.arange(3).dtype == gv.int64


def test_default_dtype_refuses_non_floats():
    with pytest.raises(TypeError, match="^only floating-point types are supported as the default type$"):
        gv.set_default_dtype(gv.int64)
    assert gv.get_default_dtype() == gv.float32


def test_generator_makes_draws_reproducible_and_leaves_the_default_alone():
    g1, g2 = gv.Generator().manual_seed(7), gv.Generator().manual_seed(7)
    assert gv.randperm(10, generator=g1).tolist() == gv.randperm(10, generator=g2).tolist()
    assert gv.randn(3, generator=g1).tolist() == gv.randn(3, generator=g2).tolist()
    assert g1.initial_seed() == 7
    gv.manual_seed(3)
    a = gv.rand(3).tolist()
    gv.manual_seed(3)
    gv.randperm(5, generator=gv.Generator().manual_seed(1))  # drawing from another generator...
    assert gv.rand(3).tolist() == a  # ...does not move the default one
    assert gv.manual_seed(5) is gv.default_generator and gv.initial_seed() == 5
    state = g1.get_state()
    first = gv.rand(4, generator=g1).tolist()
    g1.set_state(state)
    assert gv.rand(4, generator=g1).tolist() == first
    with pytest.raises(TypeError, match="expected a torch.Generator"):
        gv.randperm(3, generator=np.random.default_rng(0))


def test_legacy_constructors():
    t = gv.Tensor(5, 3)
    assert (t.shape, t.dtype, t.requires_grad) == ((5, 3), gv.float32, False)
    assert gv.Tensor([1, 2]).tolist() == [1.0, 2.0] and gv.Tensor([1, 2]).dtype == gv.float32
    assert gv.Tensor(gv.Size([2, 4])).shape == (2, 4) and gv.Tensor().shape == (0,)
    for cls, dtype in ((gv.FloatTensor, gv.float32), (gv.DoubleTensor, gv.float64), (gv.LongTensor, gv.int64),
                       (gv.IntTensor, gv.int32), (gv.BoolTensor, gv.bool)):
        assert cls(2, 3).shape == (2, 3) and cls(2, 3).dtype == dtype
        assert cls([1, 0]).dtype == dtype and cls([1, 0]).tolist() == [1, 0]
        assert isinstance(gv.zeros(1, dtype=dtype), cls)
    assert gv.LongTensor([1, 2]).tolist() == [1, 2] and not isinstance(gv.ones(1), gv.LongTensor)
    assert gv.ones(2).type(gv.LongTensor).dtype == gv.int64 and gv.ones(2).type("torch.DoubleTensor").dtype == \
        gv.float64
    assert gv.ones(1, dtype=gv.int32).type() == "torch.IntTensor"
    # the seed-era constructor still takes requires_grad positionally
    assert gv.Variable(gv.ones(2), True).requires_grad


def test_is_tensor_and_numel():
    assert gv.is_tensor(gv.ones(1)) and not gv.is_tensor([1.0]) and gv.numel(gv.ones(2, 3)) == 6


# ----- against torch -------------------------------------------------------------------------------------------
@pytest.mark.oracle
def test_devices_and_legacy_constructors_match_torch():
    torch = pytest.importorskip("torch")
    for args in (("cpu",), ("cpu:0",), ("cpu", 0), ("cuda", 1), ("mps",)):
        ours, theirs = gv.device(*args), torch.device(*args)
        assert (repr(ours), str(ours), ours.type, ours.index) == (repr(theirs), str(theirs), theirs.type,
                                                                   theirs.index)
    for bad in ("gpu", "cpu:x"):
        with pytest.raises(RuntimeError) as ours:
            gv.device(bad)
        with pytest.raises(RuntimeError) as theirs:
            torch.device(bad)
        assert str(ours.value) == str(theirs.value)
    for name in ("FloatTensor", "DoubleTensor", "LongTensor", "IntTensor", "BoolTensor"):
        for args in ((2, 3), ([1, 0, 1],), ()):
            ours, theirs = getattr(gv, name)(*args), getattr(torch, name)(*args)
            assert (tuple(ours.shape), str(ours.dtype)) == (tuple(theirs.shape), str(theirs.dtype).split(".")[1])
    assert gv.Tensor(5, 3).shape == torch.Tensor(5, 3).shape
    assert gv.Tensor([1, 2]).tolist() == torch.Tensor([1, 2]).tolist()
    assert (gv.cuda.is_available(), gv.cuda.device_count()) == (torch.cuda.is_available(), torch.cuda.device_count())
    assert gv.accelerator.current_accelerator() == torch.accelerator.current_accelerator()
    # the same exception class and the same words first, then gradviz's reason
    with pytest.raises(AssertionError) as theirs:
        torch.zeros(1, device="cuda")
    with pytest.raises(AssertionError) as ours:
        gv.zeros(1, device="cuda")
    assert str(ours.value).startswith(str(theirs.value) + ": ")


def test_factory_methods_and_device_attributes():
    x = gv.ones(2, dtype=gv.float64)
    assert (x.is_cuda, x.is_cpu, x.get_device()) == (False, True, -1)
    assert x.new_tensor([1, 2]).dtype == gv.float64 and x.new_tensor([1, 2]).tolist() == [1.0, 2.0]
    assert x.new_zeros(2, 3).shape == (2, 3) and x.new_zeros((2, 3)).dtype == gv.float64
    assert x.new_ones(2, dtype=gv.int64).dtype == gv.int64 and x.new_empty(4).shape == (4,)
    assert x.new_full((2,), 3).tolist() == [3.0, 3.0] and x.new_zeros(1, requires_grad=True).requires_grad
    assert gv.ones(2).type_as(x).dtype == gv.float64
    with pytest.raises(DeviceError):
        x.new_zeros(2, device="cuda")


@pytest.mark.oracle
def test_factory_methods_match_torch():
    torch = pytest.importorskip("torch")
    for dtype in ("float32", "float64", "int64"):
        ours, theirs = gv.ones(2, dtype=getattr(gv, dtype)), torch.ones(2, dtype=getattr(torch, dtype))
        for make in (lambda t: t.new_tensor([1, 2]), lambda t: t.new_zeros(2, 3), lambda t: t.new_full((2,), 3),
                     lambda t: t.new_ones((1, 2))):
            a, b = make(ours), make(theirs)
            assert (tuple(a.shape), str(a.dtype), a.tolist()) == (tuple(b.shape), str(b.dtype)[6:], b.tolist())


def test_seed_era_positional_flags(monkeypatch):
    monkeypatch.setattr("gradviz.autograd.variable._warned_volatile", False)  # it warns once per process
    with pytest.warns(DeprecationWarning):
        v = gv.Variable(gv.ones(2), False, True)
    assert v.volatile and not v.requires_grad
    with pytest.raises(TypeError, match="^new\\(\\): data must be a sequence or a size, not str after the data$"):
        gv.Variable(gv.ones(2), "x")


def test_seeding_boilerplate_runs():
    gv.backends.cudnn.deterministic = True
    gv.backends.cudnn.benchmark = False
    assert gv.backends.cudnn.is_available() is False and gv.backends.cudnn.version() is None
    gv.use_deterministic_algorithms(True, warn_only=True)
    assert gv.are_deterministic_algorithms_enabled() and gv.is_deterministic_algorithms_warn_only_enabled()
    gv.use_deterministic_algorithms(False)
    assert not gv.are_deterministic_algorithms_enabled()


def test_rng_state_round_trip():
    gv.manual_seed(11)
    state = gv.get_rng_state()
    first = gv.randn(5).tolist()
    gv.set_rng_state(state)
    assert gv.randn(5).tolist() == first and state.dtype == gv.uint8 and state.ndim == 1


@pytest.mark.oracle
def test_promotion_follows_the_default_dtype_as_in_torch(float64_default):
    torch = pytest.importorskip("torch")
    torch.set_default_dtype(torch.float64)
    try:
        for make in (lambda lib: lib.ones(2, dtype=lib.int64) * 0.5, lambda lib: lib.arange(3) / 2,
                     lambda lib: lib.tensor([1.0, 2.0]), lambda lib: lib.Tensor(2, 2)):
            assert str(make(gv).dtype) == str(make(torch).dtype).replace("torch.", "")
    finally:
        torch.set_default_dtype(torch.float32)
