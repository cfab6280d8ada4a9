"""Models gradviz's engine cannot run, traced on real PyTorch: each clean program gives no warning or error, and
the same program with one planted mistake gives that mistake's diagnostic at its line. Each is drawn too.

The programs are templates in tests/torch_models/ (``NAME.py.in``): a placeholder in capitals (``DETACH``,
``INPLACE``…) is replaced by the clean line or by the mistake. Sizes are tiny: each runs in well under a second
(torch.compile's first call aside, with the quick ``aot_eager`` backend).
"""

import os
import warnings

import pytest

torch = pytest.importorskip("torch")

import gradviz  # noqa: E402
from gradviz.rendering import render  # noqa: E402

pytestmark = [pytest.mark.oracle, pytest.mark.filterwarnings("ignore::UserWarning")]
MODELS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_models")


def trace_model(name, tmp_path, **substitutions):
    """Run tests/torch_models/NAME.py with its placeholders replaced, under a torch trace; returns (document,
    source lines). The script's own exception (the planted mistake's) ends the block as in `gradviz run`."""
    with open(os.path.join(MODELS, name + ".in")) as f:
        source = f.read()
    for placeholder, text in substitutions.items():
        source = source.replace(placeholder, text)
    path = tmp_path / name
    path.write_text(source)
    tr = gradviz.trace(engine="torch")
    scope = {"__name__": "__main__", "__file__": str(path)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            with tr:
                exec(compile(source, str(path), "exec"), scope)
        except RuntimeError:
            pass
    doc = tr.to_dict()
    assert not doc["internal_errors"] and doc["engine"]["name"] == "torch"
    return doc, source.splitlines()


def line(lines, text):
    return next(i for i, s in enumerate(lines, 1) if text in s)


def found(doc):
    return [(d["code"], d["severity"], d["location"]["line"]) for d in doc["diagnostics"]
            if d["severity"] in ("error", "warning")]


def drawn(doc):
    return render(doc).source


def test_lstm_language_model_detaching_the_hidden_state(tmp_path):
    doc, _ = trace_model("lstm.py", tmp_path, DETACH="hidden = tuple(h.detach() for h in hidden)", RETAIN="")
    assert found(doc) == []
    assert doc["iterations"] == 6 and doc["memory"]["final_retained_bytes"] == 0
    picture = drawn(doc)
    assert "MkldnnRnnLayerBackward0" in picture or "LstmBackward" in picture or "RnnBackward" in picture or \
        any(n["op"].startswith(("Mkldnn", "Lstm", "CudnnRnn")) for n in doc["nodes"])
    assert "EmbeddingBackward0" in picture


def test_lstm_hidden_state_not_detached_across_batches(tmp_path):
    doc, lines = trace_model("lstm.py", tmp_path, DETACH="pass", RETAIN="")
    # the second batch's backward reaches into the first batch's freed graph through `hidden`: the carry is named
    # at the call that feeds it back, the error at the backward that fails
    assert found(doc) == [("hidden-state-not-detached", "warning", line(lines, "out, hidden = rnn(")),
                          ("graph-freed", "error", line(lines, "loss.backward("))]


def test_lstm_retain_graph_in_the_loop(tmp_path):
    doc, lines = trace_model("lstm.py", tmp_path, DETACH="pass", RETAIN="retain_graph=True")
    # what people try next: the old graph is kept (through `hidden`), and the optimizer's step overwrites what
    # it saved, so the next backward fails: predicted at the step
    assert found(doc) == [("hidden-state-not-detached", "warning", line(lines, "out, hidden = rnn(")),
                          ("stale-version", "error", line(lines, "opt.step()"))]
    kept = [d for d in doc["diagnostics"] if d["code"] == "retained-graph"]
    assert [(d["severity"], d["location"]["line"]) for d in kept] == [("info", line(lines, "out, hidden = rnn("))]


def test_transformer_encoder_clean_and_with_total_loss(tmp_path):
    doc, _ = trace_model("transformer.py", tmp_path, ACCUMULATE="pass")
    assert found(doc) == []
    assert {m for m in doc["modules"] if m.startswith("encoder.layers.")} >= {
        "encoder.layers.0", "encoder.layers.3", "encoder.layers.3.self_attn"}
    assert "encoder.layers.0.self_attn.in_proj_weight" in {v["name"] for v in doc["variables"]}
    picture = drawn(doc)
    assert "MmBackward0" in picture
    # the five identical layers: the first is drawn (its input is the data), the other four as one block × 4 of
    # a layer's ops (44 on torch 2.13, 45 on 2.4, whose attention keeps one more slice node: counted, not typed)
    first = [n for n in doc["nodes"] if n.get("iteration") == 0 and n["op"] != "AccumulateGrad"]
    per_layer = [sum(1 for n in first if f"encoder.layers.{i}" in (n.get("module") or [])) for i in range(1, 5)]
    assert len(set(per_layer)) == 1 and per_layer[0] >= 40
    assert f"a loop of 4 steps × {per_layer[0]} ops is drawn once" in picture
    doc, lines = trace_model("transformer.py", tmp_path, ACCUMULATE="total_loss += loss")
    assert found(doc) == [("retained-graph", "warning", line(lines, "total_loss += loss"))]


def test_batchnorm_cnn_clean_and_inplace_on_a_saved_activation(tmp_path):
    doc, _ = trace_model("bncnn.py", tmp_path, INPLACE="pass")
    assert found(doc) == []
    assert "NativeBatchNormBackward0" in drawn(doc) and "ConvolutionBackward0" in drawn(doc)
    doc, lines = trace_model("bncnn.py", tmp_path, INPLACE="hidden *= 0.5")
    assert found(doc) == [("stale-version", "error", line(lines, "hidden *= 0.5"))]
    inplace = [e for e in doc["events"] if e["kind"] == "inplace" and e["saved_by"]]
    assert inplace and doc["backwards"][0]["seq"] > inplace[0]["seq"]  # predicted before the backward


def test_compiled_function_clean_and_with_total_loss(tmp_path):
    doc, _ = trace_model("compiled.py", tmp_path, ACCUMULATE="pass")
    assert found(doc) == []
    assert "CompiledFunctionBackward" in {n["op"] for n in doc["nodes"]}
    assert "CompiledFunctionBackward" in drawn(doc)
    doc, lines = trace_model("compiled.py", tmp_path, ACCUMULATE="total += loss")
    assert found(doc) == [("retained-graph", "warning", line(lines, "total += loss"))]


def test_dataloader_with_two_workers_clean_and_with_a_layer_left_out(tmp_path):
    doc, _ = trace_model("loader.py", tmp_path, FEATURES="features = encoder(xb)")
    assert found(doc) == [] and doc["iterations"] == 4
    doc, lines = trace_model("loader.py", tmp_path, FEATURES="with torch.no_grad(): features = encoder(xb)")
    d = [d for d in doc["diagnostics"] if d["code"] == "unused-parameter"]
    assert found(doc) == [("unused-parameter", "warning", line(lines, "encoder, classifier = nn.Linear"))]
    assert d[0]["details"]["why_none"]["cause"] == "unreachable"  # as on gradviz's engine


def test_custom_function_clean_and_inplace_on_its_saved_output(tmp_path):
    doc, lines = trace_model("custom.py", tmp_path, INPLACE="pass")
    assert found(doc) == []
    swish = [n for n in doc["nodes"] if n["op"] == "SwishBackward"]
    assert swish and swish[0]["custom"] and swish[0]["class_name"] == "Swish"
    assert swish[0]["location"]["line"] == line(lines, "h = Swish.apply(")
    assert "Swish" in drawn(doc)  # a custom Function is labelled with its class
    doc, lines = trace_model("custom.py", tmp_path, INPLACE="h.mul_(2)")
    assert found(doc) == [("stale-version", "error", line(lines, "h.mul_(2)"))]


def test_a_long_loop_keeps_bounded_records(tmp_path):
    """200 training steps: full records for the window of first and last iterations only, everything counted."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(16, 4), torch.randn(16, 1)
    with gradviz.trace(engine="torch") as tr:
        for _ in range(200):
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
    doc = tr.to_dict()
    assert doc["iterations"] == 200 and doc["dropped"]["iterations"] == 200 - 2 * doc["window"]
    assert len(doc["nodes"]) < 12 * (2 * doc["window"] + 2) and doc["diagnostics"] == []
    assert doc["structures"][0]["count"] == 200 and doc["memory"]["final_retained_bytes"] == 0


def test_custom_function_with_a_wrong_backward_is_checked_on_pytorch(tmp_path):
    """wrong-backward on real PyTorch: the custom Function's backward compared numerically with its forward
    the first time it runs (the probes run on copies, unobserved), reported at the line of its apply."""
    source = os.path.join(MODELS, "custom.py.in")
    doc, _ = trace_model("custom.py", tmp_path, INPLACE="pass")
    checks = doc["backward_checks"]["checks"]
    assert [c["status"] for c in checks] == ["passed"] and doc["backward_checks"]["repeats"] == 2
    with open(source) as f:
        wrong = f.read().replace("g * (y + s * (1 - y))", "g * s")  # forget part of the derivative
    (tmp_path / "wrong").mkdir()
    path = tmp_path / "wrong" / "custom.py"
    path.write_text(wrong.replace("INPLACE", "pass"))
    tr = gradviz.trace(engine="torch")
    with tr:
        exec(compile(path.read_text(), str(path), "exec"), {"__name__": "__main__", "__file__": str(path)})
    doc = tr.to_dict()
    lines = path.read_text().splitlines()
    assert [(d["code"], d["severity"], d["location"]["line"]) for d in doc["diagnostics"]] == [
        ("wrong-backward", "error", line(lines, "h = Swish.apply("))]
