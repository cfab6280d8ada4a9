"""Rich renderables for the terminal report: built, not printed; checked by rendering them to text."""

from rich.console import Console

from gradviz.rendering.report import diagnostics_table, memory_table, sparkline, summary
from tests.synthetic_docs import DocBuilder, chained_models_doc


def text_of(renderable):
    console = Console(width=140, record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


def test_summary_lists_graphs_structures_and_parameter_gradients():
    doc = chained_models_doc()
    doc["backwards"][0]["leaf_grad_norms"].pop("3")        # pretend model2.weight (v3) got no gradient
    out = text_of(summary(doc))
    assert "graphs          1 built, 1 distinct structure" in out
    assert "parameters      4, 1 got no gradient" in out
    assert "structure 0: 9 nodes, seen 1× (iteration 0)" in out
    assert "backward calls  1" in out
    lines = {line.split()[0]: line.split()[-1] for line in out.splitlines() if line.startswith("  model")}
    assert lines == {"model1.weight": "yes", "model1.bias": "yes", "model2.weight": "none", "model2.bias": "yes"}


def test_diagnostics_table_shows_location_source_line_and_hint():
    out = text_of(diagnostics_table(chained_models_doc()))
    lines = [line.rstrip() for line in out.splitlines()]
    assert lines[:3] == ["Diagnostics (2)", " severity  code                where",
                         " warning   none-grad           model.py:12"]
    assert lines[3:6] == ["    y1.grad is None: y1 is not a leaf", "      12 │ y1.backward(y1.grad)",
                          "    hint: call y1.retain_grad() before backward (gradviz explain none-grad)"]
    assert " error     nonscalar-backward  model.py:12" in lines
    # an empty document saw nothing: no all-clear (tests/test_report_unseen.py has the cases)
    assert "nothing suspicious" not in text_of(diagnostics_table(DocBuilder().finish()))


def test_report_reads_well_at_80_columns():
    # every line fits: the message and hint wrap under their diagnostic instead of a narrow column
    doc = chained_models_doc()
    doc["diagnostics"][0]["message"] = "a long message " * 20
    console = Console(width=80, record=True, color_system=None)
    for part in (summary(doc), diagnostics_table(doc), memory_table(doc)):
        console.print(part)
    out = console.export_text()
    assert max(len(line.rstrip()) for line in out.splitlines()) <= 80
    message_lines = [line for line in out.splitlines() if "long message" in line]
    assert len(message_lines) == 4 and all(line.startswith("    ") and "│" not in line for line in message_lines)
    assert "Memory  saved tensors that graphs still hold for backward" in out


def test_paths_under_the_current_folder_are_shown_relative(tmp_path, monkeypatch):
    from gradviz.rendering.report import display_path

    monkeypatch.chdir(tmp_path)
    assert display_path(str(tmp_path / "sub" / "train.py")) == "sub/train.py"
    assert display_path("/elsewhere/train.py") == "/elsewhere/train.py"
    assert display_path("train.py") == "train.py"


def test_memory_table_with_growing_sparkline():
    b = DocBuilder()
    for _ in range(4):
        w = b.leaf("w", [250], parameter=True)
        b.backward(b.op("SumBackward", [b.op("ExpBackward", [w], [250], saved=[w])], []), retain_graph=True)
        b.next_iteration()
    out = text_of(memory_table(b.finish()))
    assert "peak retained   3.9 KiB" in out and "final retained  3.9 KiB" in out
    assert "▃▅▆██" in out and "iterations 0–4: 1000 B → 3.9 KiB (growing)" in out
    assert sparkline([0, 0]) == "▁▁" and sparkline([1, 2, 4]) == "▃▅█"


def _traced(body):
    import gradviz
    scope = {}
    with gradviz.trace() as tr:
        exec(body, scope)
    return tr.to_dict()


def test_summary_leaves_out_parameters_of_modules_never_used_nor_optimized():
    # nn.TransformerEncoder deep-copies its template layer, as PyTorch does: the template is never called
    body = (
        "import gradviz as torch\nimport gradviz.nn as nn\ntorch.manual_seed(0)\n"
        "layer = nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, batch_first=True)\n"
        "encoder = nn.TransformerEncoder(layer, num_layers=2)\n"
        "opt = torch.optim.SGD({params}, lr=0.1)\n"
        "opt.zero_grad()\nencoder(torch.randn(2, 3, 8)).pow(2).mean().backward()\nopt.step()\n")
    out = text_of(summary(_traced(body.format(params="encoder.parameters()"))))
    assert "parameters      24, all got a gradient (and 12 parameters that no op used and no optimizer was given, " \
           "the first made at <string>:4)" in out
    # given to the optimizer, the template's parameters are the user's: listed without a gradient
    out = text_of(summary(_traced(body.format(params="[*encoder.parameters(), *layer.parameters()]"))))
    assert "parameters      36, 12 got no gradient" in out and "and 12 parameters" not in out


def test_summary_says_where_a_lone_unused_parameter_was_made_with_its_file_name_as_plain_text():
    # weight_norm-style: a module's parameter replaced by others, so the old one has no name in the model
    doc = _traced("import gradviz as torch\nimport gradviz.nn as nn\n"
                  "lin = nn.Linear(3, 2)\nold = lin.weight\n"
                  "lin.weight = nn.Parameter(torch.ones(2, 3))\nlin(torch.ones(1, 3)).sum().backward()\n")
    for v in doc["variables"]:
        if v.get("location"):
            v["location"]["file"] = "[bold]odd[/bold]\x1b.py"
    out = text_of(summary(doc))
    assert "(and 1 parameter that no op used and no optimizer was given, made at [bold]odd[/bold]\\x1b.py:3)" \
        in " ".join(out.split())


def test_summary_shows_frozen_parameters_as_frozen():
    body = ("import gradviz as torch\nimport gradviz.nn as nn\n"
            "model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))\n"
            "model[0].requires_grad_(False)\n"
            "opt = torch.optim.SGD(model[2].parameters(), lr=0.1)\n"
            "model(torch.randn(5, 3)).sum().backward()\nopt.step()\n")
    out = text_of(summary(_traced(body)))
    assert "parameters      4, 2 frozen, the others all got a gradient" in out
    rows = {line.split()[0]: line.split()[-1] for line in out.splitlines() if line.startswith("  model")}
    assert rows == {"model.0.weight": "frozen", "model.0.bias": "frozen", "model.2.weight": "yes",
                    "model.2.bias": "yes"}


def test_summary_counts_every_backward_call_not_only_those_kept_in_full():
    import gradviz
    import gradviz.nn as nn

    model = nn.Linear(3, 1)
    with gradviz.trace() as tr:
        for _ in range(20):
            model.zero_grad()
            model(gradviz.ones(2, 3)).sum().backward()
    doc = tr.to_dict()
    assert len(doc["backwards"]) < 20  # the window kept only some in full
    assert ["backward", "calls", "20"] in [line.split() for line in text_of(summary(doc)).splitlines()]
