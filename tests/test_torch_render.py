"""A PyTorch graph that already exists, drawn without a trace (what torchviz's make_dot does): PyTorch's node
names, parameter names from the model or the caller's modules, module clusters when given the model."""

import gc
import weakref

import pytest

torch = pytest.importorskip("torch")

from gradviz.rendering import render  # noqa: E402
from gradviz.tracing.adapters.torch.snapshot import snapshot  # noqa: E402

pytestmark = pytest.mark.oracle


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))


def test_snapshot_has_pytorchs_nodes_edges_and_shapes():
    model = _mlp()
    loss = model(torch.randn(5, 4)).pow(2).mean()
    doc = snapshot(loss)
    ops = [n["op"] for n in doc["nodes"]]
    assert sorted(ops) == sorted(["MeanBackward0", "PowBackward0", "AddmmBackward0", "TBackward0", "ReluBackward0",
                                  "AddmmBackward0", "TBackward0"] + ["AccumulateGrad"] * 4)
    by_id = {n["id"]: n for n in doc["nodes"]}
    root = next(n for n in doc["nodes"] if n["op"] == "MeanBackward0")
    assert [by_id[i]["op"] for i, _ in root["inputs"]] == ["PowBackward0"]
    relu = next(n for n in doc["nodes"] if n["op"] == "ReluBackward0")
    # a node built before gradviz looked has its shape from the node's _input_metadata; torch 2.4 has none (the
    # shape is not known there: left empty)
    has_metadata = hasattr(loss.grad_fn, "_input_metadata")
    assert relu["shape"] == ([5, 3] if has_metadata else []) and relu["saved"][0]["kind"] == "output"
    # names: the caller binds `model` (its parameters) and `loss`
    names = {v["name"] for v in doc["variables"]}
    assert {"model.0.weight", "model.0.bias", "model.2.weight", "model.2.bias", "loss"} <= names


def test_given_the_model_nodes_are_clustered_by_module():
    net = _mlp()
    out = net(torch.randn(5, 4)).sum()
    doc = snapshot(out, model=net)
    modules = {n["op"] + str(i): n["module"] for i, n in enumerate(doc["nodes"]) if n["op"] == "AddmmBackward0"}
    assert sorted(m[-1] for m in modules.values()) == ["net.0", "net.2"]
    picture = render(doc).source
    assert "AddmmBackward0" in picture and "cluster" in picture and "net.0.weight" in picture


def test_a_snapshot_keeps_nothing_alive():
    model = _mlp()
    loss = model(torch.randn(5, 4)).sum()
    snapshot(loss)
    ref = weakref.ref(loss.grad_fn.metadata["gradviz"])  # our tag in the node's metadata: dies with the node
    del loss
    gc.collect()
    assert ref() is None


def test_snapshot_refuses_other_objects():
    with pytest.raises(TypeError, match="snapshot\\(\\) takes torch tensors, got str"):
        snapshot("loss")


def test_gradviz_render_takes_a_torch_tensor_and_the_model():
    import gradviz

    net = _mlp()
    loss = net(torch.randn(5, 4)).pow(2).mean()
    picture = gradviz.render(loss, model=net).source
    assert "AddmmBackward0" in picture and "net.2.weight" in picture and "cluster" in picture
    assert "MeanBackward0" in gradviz.render([loss]).source
    with pytest.raises(TypeError, match="render\\(model=...\\) is for PyTorch tensors, not dict"):
        gradviz.render({}, model=net)


def test_render_of_a_transformer_given_its_model_draws_module_clusters_not_one_box():
    # issue 27: a 4-layer transformer's snapshot was drawn "collapsed to depth 0" with no cluster at all: walked
    # from the loss, its nodes came in walk order, and each run of one module's nodes counted as another call
    import re

    import gradviz

    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, dropout=0.0, batch_first=True)
    model = torch.nn.Sequential(torch.nn.TransformerEncoder(layer, num_layers=4, enable_nested_tensor=False),
                                torch.nn.Linear(16, 1))
    loss = torch.nn.functional.mse_loss(model(torch.randn(4, 6, 16)), torch.randn(4, 6, 1))
    source = gradviz.render(loss, model=model, format="dot").source
    assert "call 2" not in source                                        # each module called once
    depth = re.search(r"modules deeper than (\d+) are collapsed", source)
    assert depth is not None and int(depth.group(1)) >= 2
    clusters = set(re.findall(r'id="gv-cluster_\d+", label=<<TABLE[^>]*><TR><TD><FONT[^>]*><B>([^<]*)</B>', source))
    assert {"model", "model.0"} <= clusters
    boxes = re.findall(r"<B>(model\.0\.layers\.\d)</B>", source)
    assert len(clusters) + len(set(boxes)) >= 6                       # the layers as clusters or boxes
