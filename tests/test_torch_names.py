"""Names and inputs on real PyTorch (torch 2.13): the forward view starts at the model input (the adapter's
``input_variables`` line up with each node's ``inputs``), saved tensors point at the Variable they are, and
parameters of nested modules keep distinct module paths on both engines, in pictures, the inspector and
report.json."""

import collections
import json

import pytest

torch = pytest.importorskip("torch")

from click.testing import CliRunner  # noqa: E402

from gradviz.cli import main  # noqa: E402
from gradviz.rendering import build_graph  # noqa: E402
from gradviz.rendering.html import report_data  # noqa: E402
from tests import render_models  # noqa: E402
from tests.test_render_real_models import components, texts  # noqa: E402

pytestmark = pytest.mark.oracle


def mlp():
    nn = torch.nn
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    return model, torch.randn(4, 6), torch.tensor([0, 2, 1, 1])


def lstm_lm():
    nn = torch.nn

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(20, 8)
            self.rnn = nn.LSTM(8, 8, num_layers=2)
            self.out = nn.Linear(8, 20)

        def forward(self, ids):
            h, _ = self.rnn(self.emb(ids))
            return self.out(h).flatten(0, 1)

    torch.manual_seed(0)
    return LM(), torch.randint(0, 20, (5, 2)), torch.randint(0, 20, (10,))


@pytest.fixture(scope="module")
def docs():
    made = {"mlp": mlp(), "transformer": render_models.transformer(layers=2),
            "resnet": render_models.resnet((2, 2, 2, 2)), "lstm": lstm_lm()}
    return {name: render_models.traced_step(*args) for name, args in made.items()}


def _input_item(spec, shape):
    found = [n for n in spec.nodes if texts(n)[0] == "input of model"]
    assert len(found) == 1, [texts(n) for n in spec.nodes if n.kind in ("leaf", "const")]
    assert texts(found[0])[1] == shape
    return found[0]


@pytest.mark.parametrize("name, shape, first", [
    ("mlp", "(4, 6)", "Addmm"), ("transformer", "(2, 5, 16)", "Add"),
    ("resnet", "(2, 3, 16, 16)", "Convolution"), ("lstm", "(5, 2)", "Embedding")])
def test_forward_view_starts_at_the_model_input(docs, name, shape, first):
    spec = build_graph(docs[name], forward=True, node_budget=None)
    item = _input_item(spec, shape)
    # the input is drawn once, connected to the op that first reads it, and the picture is one piece
    heads = {e.head for e in spec.edges if e.tail == item.name}
    assert heads and first in {texts(n)[0] for n in spec.nodes if n.name in heads}
    assert components(spec) == 1


def test_a_conv_without_bias_lines_its_input_up_with_its_inputs(docs):
    doc = docs["resnet"]
    variables = {v["id"]: v for v in doc["variables"]}
    conv = next(n for n in doc["nodes"] if n["op"] == "ConvolutionBackward0")
    # next_functions: (input: needs no gradient, weight, bias=None); the input is slot 0, the absent bias None
    assert [e[0] is None for e in conv["inputs"]] == [True, False, True]
    assert variables[conv["input_variables"][0]]["name"] == "input of model"
    assert variables[conv["input_variables"][1]]["name"] == "model.conv1.weight"
    assert conv["input_variables"][2] is None
    # every node's input_variables has an entry per input, then the arguments that feed none
    assert all(len(n["input_variables"]) >= len(n["inputs"]) for n in doc["nodes"] if n["inputs"])


def _unnamed(doc):
    return collections.Counter((n["op"], s["kind"]) for n in doc["nodes"] for s in n.get("saved") or []
                               if s.get("variable") is None)


def test_saved_tensors_point_at_their_variables(docs):
    doc = docs["transformer"]
    variables = {v["id"]: v for v in doc["variables"]}
    total = sum(len(n.get("saved") or []) for n in doc["nodes"])
    # torch 2.13: 35 of 53 had no Variable before; layer norms' weights and ReLU's saved results are named now
    assert (total, sum(_unnamed(doc).values())) == (53, 25)
    assert _unnamed(doc) == {("ScaledDotProductFlashAttentionForCpuBackward0", "input"): 10,
                             ("NativeLayerNormBackward0", "output"): 8, ("MmBackward0", "input"): 2,
                             ("AddmmBackward0", "input"): 2, ("LogSoftmaxBackward0", "output"): 1,
                             ("NllLossBackward0", "input"): 2}
    norm = next(n for n in doc["nodes"] if n["op"] == "NativeLayerNormBackward0")
    assert [variables[s["variable"]]["name"] for s in norm["saved"] if s["variable"] is not None] == [
        "model.encoder.layers.0.norm1.bias", None, "model.encoder.layers.0.norm1.weight"]
    # (the middle one is the residual sum, an op's output: pictures name it "Add of model.encoder.layers.0")
    relu = next(n for n in doc["nodes"] if n["op"] == "ReluBackward0")
    assert [s["variable"] for s in relu["saved"]] == relu["outputs"]


def test_saved_tensors_of_an_lstm(docs):
    doc = docs["lstm"]
    total = sum(len(n.get("saved") or []) for n in doc["nodes"])
    assert (total, sum(_unnamed(doc).values())) == (29, 11)   # 12 before: the LSTM's saved output
    # what stays unnamed is made inside one call, never a Python tensor: the LSTM's hidden and cell states and
    # workspace, the input of its second layer; the log-softmax inside cross_entropy and its total weight
    assert _unnamed(doc) == {("MkldnnRnnLayerBackward0", "output"): 7, ("MkldnnRnnLayerBackward0", "input"): 1,
                             ("LogSoftmaxBackward0", "output"): 1, ("NllLossBackward0", "input"): 2}


NESTED = """\
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(4, 4), nn.Tanh()) for _ in range(2)])
        self.head = nn.Linear(4, 1)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


net = Net()
batch = torch.randn(3, 4)
net(batch).sum().backward()
"""

NESTED_NAMES = ["net.blocks.0.0.weight", "net.blocks.0.0.bias", "net.blocks.1.0.weight", "net.blocks.1.0.bias",
                "net.head.weight", "net.head.bias"]


@pytest.mark.parametrize("engine", ["torch", "gradviz"])
def test_nested_modules_name_parameters_by_path_everywhere(tmp_path, engine):
    """Sequential in a ModuleList in a module: each Linear's parameters by their own path, in report.json, the
    picture's leaves and the inspector's data; the batch by its Python name."""
    script = tmp_path / "nested.py"
    script.write_text(NESTED)
    out = tmp_path / "out"
    # in this process, through the CLI's own entry (a fresh interpreter per engine cost more than the run)
    done = CliRunner().invoke(main, ["run", "--engine", engine, "--format", "dot", "-q", "--out", str(out),
                                     str(script)], catch_exceptions=False)
    assert done.exit_code == 0, done.stderr
    doc = json.loads((out / "report.json").read_text())
    assert doc["engine"]["name"] == engine
    params = {v["id"]: v["name"] for v in doc["variables"] if v.get("is_parameter")}
    assert sorted(params.values()) == sorted(NESTED_NAMES)
    spec = build_graph(doc, node_budget=None, fold_loops=False)
    assert sorted(texts(n)[0] for n in spec.nodes if n.kind == "leaf") == sorted(NESTED_NAMES)
    data = report_data(doc)
    assert sorted(data["variables"][v]["name"] for v in params) == sorted(NESTED_NAMES)
    inspected = {n["variable_name"] for n in data["nodes"].values() if n["variable_name"]}
    assert set(NESTED_NAMES) <= inspected
    assert "batch" in {texts(n)[0] for n in build_graph(doc, forward=True, node_budget=None).nodes}


W, B, X, T, OLD, NEW = ("w", "leaf"), ("b", "leaf"), ("x", "leaf"), (7, 0), (5, 0), (9, 0)


@pytest.mark.parametrize("slots, arguments, fed, rest", [
    ([None, W, None], [None, W], [0, 1, None], []),              # conv2d(x, w, bias=None), x needs no grad
    ([B, None, T], [None, W, B], [2, 0, 1], []),                 # F.linear(x, w, b) as addmm(b, x, w.t())
    ([W], [W, None], [0], [1]),                                  # embedding(weight, ids): the ids feed no input
    ([X, X], [X], [0, 0], []),                                   # x * x
    ([OLD, W], [NEW, W], [0, 1], []),                            # x.mul_(w): x's edge moved to its own node
    ([None, W], [None, None, W], [None, 2], [0, 1]),             # two candidates for one input: no guess
])
def test_align_inputs(slots, arguments, fed, rest):
    from gradviz.tracing.adapters.torch.graph import align_inputs

    assert align_inputs(slots, arguments) == (fed, rest)


def test_an_inner_node_takes_no_moved_argument():
    from gradviz.tracing.adapters.torch.graph import align_inputs

    # an inner node of a call whose input is another node of the call: the weight is not guessed onto it
    assert align_inputs([T, None], [W, None], moved=False) == ([None, 1], [0])
    assert align_inputs([T, None], [W, None]) == ([0, 1], [])
