"""save / load: tensors, state_dicts and optimizer states round-trip exactly, in a format read without pickle;
anything else is refused in one line."""

import io
import json
import math
import pickle
import zipfile
from collections import OrderedDict

import numpy as np
import pytest

import gradviz as gv
import gradviz.nn as nn
import gradviz.optim as optim
from gradviz.serialization import LoadError, SaveError


def net():
    return nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.Flatten(), nn.Linear(8, 3))


def test_a_model_state_dict_round_trips_to_identical_outputs(tmp_path):
    gv.manual_seed(0)
    model, other = net(), net()
    x = gv.randn(2, 1, 4, 4)
    gv.save(model.state_dict(), tmp_path / "model.pt")
    loaded = gv.load(tmp_path / "model.pt")
    assert isinstance(loaded, OrderedDict) and list(loaded) == list(model.state_dict())
    other.load_state_dict(loaded)
    np.testing.assert_array_equal(other(x).detach().numpy(), model(x).detach().numpy())
    assert not any(t.requires_grad for t in loaded.values())


def test_an_optimizer_state_round_trip_continues_training_identically(tmp_path):
    gv.manual_seed(1)
    data = [(gv.randn(4, 8), gv.randint(0, 3, (4,))) for _ in range(6)]

    def train(model, opt, batches):
        for x, y in batches:
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()

    gv.manual_seed(2)
    straight = nn.Linear(8, 3)
    straight_opt = optim.Adam(straight.parameters(), lr=0.01, amsgrad=True)
    train(straight, straight_opt, data)

    gv.manual_seed(2)
    first = nn.Linear(8, 3)
    first_opt = optim.Adam(first.parameters(), lr=0.01, amsgrad=True)
    train(first, first_opt, data[:3])
    buffer = io.BytesIO()
    gv.save({"model": first.state_dict(), "optimizer": first_opt.state_dict(), "epoch": 3}, buffer)
    buffer.seek(0)
    checkpoint = gv.load(buffer, map_location="cpu", weights_only=True)
    assert checkpoint["epoch"] == 3
    assert checkpoint["optimizer"]["param_groups"][0]["betas"] == (0.9, 0.999)  # tuples stay tuples
    resumed = nn.Linear(8, 3)
    resumed.load_state_dict(checkpoint["model"])
    resumed_opt = optim.Adam(resumed.parameters(), lr=0.5)
    resumed_opt.load_state_dict(checkpoint["optimizer"])
    train(resumed, resumed_opt, data[3:])
    for a, b in zip(straight.parameters(), resumed.parameters()):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


def test_values_of_every_supported_kind_come_back_equal_and_typed(tmp_path):
    shared = gv.arange(6).reshape(2, 3)
    obj = {"t": gv.tensor([1.5, -2.0], dtype=gv.float64), "b": gv.tensor([True, False]), "n": None,
           "nums": [1, 2.5, True, float("inf"), float("nan")], "tuple": (1, "two"), 3: "int key",
           "shape": gv.Size([2, 3]), "dtype": gv.float64, "device": gv.device("cpu"),
           "same": [shared, shared], "param": nn.Parameter(gv.ones(2)), "np": np.float32(0.5),
           "empty": gv.zeros(0, 3), "scalar": gv.tensor(3)}
    gv.save(obj, str(tmp_path / "x.pt"))
    back = gv.load(str(tmp_path / "x.pt"))
    assert back["t"].dtype == gv.float64 and back["t"].tolist() == [1.5, -2.0]
    assert back["b"].dtype == gv.bool and back["n"] is None and back[3] == "int key"
    assert back["nums"][:4] == [1, 2.5, True, math.inf] and math.isnan(back["nums"][4])
    assert isinstance(back["nums"][2], bool) and back["tuple"] == (1, "two")
    assert back["shape"] == gv.Size([2, 3]) and isinstance(back["shape"], gv.Size)
    assert back["dtype"] == gv.float64 and back["device"] == gv.device("cpu")
    assert back["same"][0] is back["same"][1]  # one tensor saved twice loads as one tensor
    assert isinstance(back["param"], nn.Parameter) and back["param"].requires_grad
    assert back["np"] == 0.5 and back["empty"].shape == (0, 3) and back["scalar"].shape == ()


def test_the_file_is_a_zip_of_a_json_manifest_and_npy_arrays(tmp_path):
    gv.save({"w": gv.ones(2, 2)}, tmp_path / "f.pt")
    with zipfile.ZipFile(tmp_path / "f.pt") as archive:
        assert archive.namelist() == ["gradviz-save.json", "tensors/0.npy"]
        manifest = json.loads(archive.read("gradviz-save.json"))
        array = np.load(io.BytesIO(archive.read("tensors/0.npy")), allow_pickle=False)
    assert manifest == {"format": "gradviz-save", "version": 1,
                        "object": {"dict": [["w", {"tensor": 0, "requires_grad": False}]]}}
    assert array.dtype == np.float32 and array.shape == (2, 2)


def test_objects_beyond_weights_are_refused_when_saving(tmp_path):
    with pytest.raises(SaveError) as info:
        gv.save(nn.Linear(2, 2), tmp_path / "m.pt")
    assert str(info.value) == ("gradviz.save stores tensors, numbers, strings and lists/tuples/dicts of them (what "
                               "torch.load(weights_only=True) reads), not an object of type "
                               "gradviz.nn.modules.linear.Linear at obj; save its state_dict() instead")
    with pytest.raises(SaveError, match=r"not an object of type function at obj\['f'\]$"):
        gv.save({"f": lambda: 0}, tmp_path / "f.pt")
    assert not (tmp_path / "m.pt").exists() and not list(tmp_path.iterdir())  # nothing half-written


def test_a_pickle_or_pytorch_file_is_one_line_and_never_unpickled(tmp_path):
    class Boom:
        def __reduce__(self):
            return (exec, ("raise SystemExit('unpickled!')",))

    (tmp_path / "evil.pt").write_bytes(pickle.dumps(Boom()))
    with pytest.raises(LoadError) as info:
        gv.load(tmp_path / "evil.pt")
    assert str(info.value) == (f"`{tmp_path / 'evil.pt'}` was not written by gradviz.save (gradviz's engine loads "
                               "only its own safe format, never a pickle)")
    assert isinstance(info.value, pickle.UnpicklingError)
    with zipfile.ZipFile(tmp_path / "torchlike.pt", "w") as archive:  # PyTorch's files are zips of a pickle
        archive.writestr("archive/data.pkl", pickle.dumps({"w": 1}))
    with pytest.raises(LoadError, match="is not a gradviz.save file .a PyTorch file.") as info:
        gv.load(tmp_path / "torchlike.pt")
    assert "\n" not in str(info.value)


def test_a_damaged_file_is_one_line(tmp_path):
    gv.save([gv.ones(3)], tmp_path / "ok.pt")
    data = (tmp_path / "ok.pt").read_bytes()
    (tmp_path / "cut.pt").write_bytes(data[: len(data) // 2])
    with pytest.raises(LoadError, match="is damaged: ") as info:
        gv.load(tmp_path / "cut.pt")
    assert "\n" not in str(info.value)


def test_map_location_forms(tmp_path):
    gv.save({"w": gv.ones(2)}, tmp_path / "w.pt")
    for location in ("cpu", gv.device("cpu"), {"cuda:0": "cpu"}, lambda storage, loc: storage):
        assert gv.load(tmp_path / "w.pt", map_location=location)["w"].tolist() == [1.0, 1.0]
    with pytest.raises(AssertionError, match="^Torch not compiled with CUDA enabled"):
        gv.load(tmp_path / "w.pt", map_location="cuda")


@pytest.mark.oracle
def test_what_is_saved_is_what_torch_weights_only_accepts():
    """The same state_dict saved by torch loads with weights_only=True: gradviz stores no more than that."""
    torch = pytest.importorskip("torch")
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.Adam(model.parameters())
    model(torch.ones(1, 3)).sum().backward()
    opt.step()
    buffer = io.BytesIO()
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, buffer)
    buffer.seek(0)
    torch.load(buffer, weights_only=True)  # the kinds of values gradviz saves are all allowed there
    ours = nn.Linear(3, 2)
    ours_opt = optim.Adam(ours.parameters())
    ours(gv.ones(1, 3)).sum().backward()
    ours_opt.step()
    saved = io.BytesIO()
    gv.save({"model": ours.state_dict(), "optimizer": ours_opt.state_dict()}, saved)
    saved.seek(0)
    back = gv.load(saved)
    theirs = opt.state_dict()
    assert set(back["optimizer"]["param_groups"][0]) == set(theirs["param_groups"][0])
    assert set(back["optimizer"]["state"][0]) == set(theirs["state"][0])
