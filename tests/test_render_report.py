"""Rich renderables for the terminal report: built, not printed; checked by rendering them to text."""

from rich.console import Console

from gradviz.rendering.report import sparkline, summary, terminal_report, verdict
from tests.synthetic_docs import DocBuilder, chained_models_doc


def text_of(renderable):
    console = Console(width=140, record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


def test_summary_lists_graphs_structures_and_only_the_parameters_without_a_gradient():
    doc = chained_models_doc()
    doc["backwards"][0]["leaf_grad_norms"].pop("3")        # pretend model2.weight (v3) got no gradient
    out = text_of(summary(doc))
    assert "graphs          1 built; structure 0: 9 nodes, seen 1× (iteration 0)" in out  # one structure: one line
    assert "parameters      4, 1 got no gradient" in out
    assert "backward calls  1" in out
    rows = [line.split() for line in out.splitlines() if line.startswith("  ")]
    assert rows == [["without", "a", "gradient", "shape"], ["model2.weight", "(1,", "2)"]]
    doc["backwards"][0]["leaf_grad_norms"]["3"] = 1.0  # all got one: no table, the line says it
    out = text_of(summary(doc))
    assert "parameters      4, all got a gradient" in out and "without a gradient" not in out


def test_summary_lists_each_structure_when_there_are_several():
    b = DocBuilder()
    for width in (2, 3):  # two iterations of different shapes: two structures
        w = b.leaf("w", [width], parameter=True)
        b.backward(b.op("SumBackward", [b.op("ExpBackward", [w], [width])], []))
        b.next_iteration()
    out = [line.rstrip() for line in text_of(summary(b.finish())).splitlines()]
    graphs = next(i for i, line in enumerate(out) if line.startswith("graphs"))
    assert out[graphs].endswith("2 distinct structures") and "nodes)" in out[graphs]
    assert out[graphs + 1].strip().startswith("structure 0: ") and out[graphs + 2].strip().startswith("structure 1: ")


def test_the_verdict_is_the_first_line_then_the_diagnostics_then_the_summary():
    doc = chained_models_doc()
    console = Console(width=140, record=True, color_system=None)
    for part in terminal_report(doc):
        console.print(part)
    lines = [line.rstrip() for line in console.export_text().splitlines()]
    assert lines[0] == "gradviz: 2 mistakes found (1 error, 1 warning)"
    assert lines[1:3] == [" warning  none-grad           model.py:12", "    y1.grad is None: y1 is not a leaf"]
    assert lines[3:5] == ["      12 │ y1.backward(y1.grad)",
                          "    hint: call y1.retain_grad() before backward (gradviz explain none-grad)"]
    assert lines.index(" error    nonscalar-backward  model.py:12") < lines.index("Summary")
    # a clean run: the verdict and the summary, nothing between
    clean = chained_models_doc()
    clean["diagnostics"] = []
    parts = terminal_report(clean)
    assert text_of(parts[0]) == "gradviz: no mistakes seen in 1 graph\n" and parts[1] is None
    # an empty document saw nothing: no all-clear (tests/test_report_unseen.py has the cases)
    assert "no mistakes" not in text_of(verdict(DocBuilder().finish()))


def test_report_reads_well_at_80_columns():
    # every line fits: the message and hint wrap under their diagnostic instead of a narrow column
    doc = chained_models_doc()
    doc["diagnostics"][0]["message"] = "a long message " * 20
    console = Console(width=80, record=True, color_system=None)
    for part in terminal_report(doc):
        console.print(part)
    out = console.export_text()
    assert max(len(line.rstrip()) for line in out.splitlines()) <= 80
    message_lines = [line for line in out.splitlines() if "long message" in line]
    assert len(message_lines) == 4 and all(line.startswith("    ") and "│" not in line for line in message_lines)
    assert "memory          peak " in out


def test_paths_under_the_current_folder_are_shown_relative(tmp_path, monkeypatch):
    from gradviz.rendering.report import display_path

    monkeypatch.chdir(tmp_path)
    assert display_path(str(tmp_path / "sub" / "train.py")) == "sub/train.py"
    assert display_path("/elsewhere/train.py") == "/elsewhere/train.py"
    assert display_path("train.py") == "train.py"


def test_memory_rows_with_growing_sparkline():
    b = DocBuilder()
    for _ in range(4):
        w = b.leaf("w", [250], parameter=True)
        b.backward(b.op("SumBackward", [b.op("ExpBackward", [w], [250], saved=[w])], []), retain_graph=True)
        b.next_iteration()
    out = text_of(summary(b.finish()))
    assert "memory          peak 3.9 KiB held for backward, 3.9 KiB at the end" in out
    assert "▃▅▆██  iterations 0–4: 1000 B → 3.9 KiB (growing)" in out
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
    assert "without a gradient" not in out  # nothing to look at: no table


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
