"""Bounded outputs whatever the run's length: report.json capped (and what it left out counted in ``dropped``),
at most ``--max-pictures`` pictures (the first graph, the diagnosed ones, the largest), a total rendering
budget, PNG drawn from the laid-out graph, and a terminal report that fits a screen."""

import json
import re
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import gradviz
from gradviz.cli import main
from gradviz.document import validate
from gradviz.rendering import raster
from gradviz.rendering.pictures import choose_pictures
from gradviz.tracing import document, grouping

NEEDS_DOT = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot program is not installed")

# REINFORCE as pytorch/examples writes it, cut down: one graph per episode, as long as the episode, so a new graph
# shape (structure) per episode. Episode e has 2 + (7e mod (LONGEST - 1)) steps: the first LONGEST - 1 episodes
# are all new shapes, episode 42 is the longest when LONGEST is 60. Returns are NaN in episode NAN_AT.
RL_SCRIPT = """\
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

EPISODES, LONGEST, NAN_AT = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(0)
torch.manual_seed(0)
policy = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
opt = torch.optim.SGD(policy.parameters(), lr=1e-3)
for episode in range(EPISODES):
    log_probs = []
    for t in range(2 + (episode * 7) % (LONGEST - 1)):
        state = torch.tensor(rng.standard_normal(4), dtype=torch.float32)
        log_probs.append(F.log_softmax(policy(state), dim=-1)[int(rng.integers(0, 2))])
    returns = torch.tensor(rng.standard_normal(len(log_probs)), dtype=torch.float32)
    if episode == NAN_AT:
        returns = returns * float("nan")
    loss = -(torch.stack(log_probs) * returns).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def length(episode, longest):
    return 2 + (episode * 7) % (longest - 1)


def reinforce(torch, episodes, longest):
    """The loop of RL_SCRIPT on ``torch`` (gradviz or real PyTorch), without NaN."""
    rng = np.random.default_rng(0)
    policy = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    opt = torch.optim.SGD(policy.parameters(), lr=1e-3)
    for episode in range(episodes):
        log_probs = []
        for _ in range(length(episode, longest)):
            state = torch.tensor(rng.standard_normal(4), dtype=torch.float32)
            log_probs.append(torch.nn.functional.log_softmax(policy(state), dim=-1)[int(rng.integers(0, 2))])
        returns = torch.tensor(rng.standard_normal(len(log_probs)), dtype=torch.float32)
        loss = -(torch.stack(log_probs) * returns).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()


@pytest.fixture
def small_caps(monkeypatch):
    """Caps small enough for a short run to pass them several times over."""
    monkeypatch.setattr(grouping, "STRUCTURE_NODE_LIMIT", 600)
    monkeypatch.setattr(document, "DOCUMENT_NODE_LIMIT", 1500)


def traced(episodes, longest, engine="gradviz", window=3):
    if engine == "torch":
        import torch
    else:
        torch = gradviz  # PyTorch's names
    with gradviz.trace(engine=engine, window=window) as tr:
        reinforce(torch, episodes, longest)
    return tr.to_dict()


def _op_nodes(doc):
    return [n for n in doc["nodes"] if n["op"] != "AccumulateGrad"]


@pytest.mark.parametrize("engine", ["gradviz", "torch"])
def test_a_run_with_a_new_shape_per_episode_keeps_a_capped_document_and_counts_the_rest(small_caps, engine,
                                                                                         monkeypatch):
    episodes, longest = 70, 60
    doc = traced(episodes, longest, engine)
    monkeypatch.setattr(document, "DOCUMENT_NODE_LIMIT", 10**9)
    everything = traced(episodes, longest, engine, window=10**6)  # the same run with every record kept
    dropped = doc["dropped"]
    # every episode is counted under its structure; the structures are those of the episode lengths
    assert sum(s["count"] for s in doc["structures"]) == doc["iterations"] == episodes
    assert len(doc["structures"]) == len({length(e, longest) for e in range(episodes)}) == longest - 1
    assert dropped["iterations"] == episodes - 2 * 3
    # the graphs kept: the two windows, the largest episode (42, longest steps), then first sightings while they fit
    kept = {g["iteration"] for g in doc["graphs"]}
    assert {0, 1, 2, 67, 68, 69, 42} <= kept
    assert dropped["structure_graphs"] > 0 and f"{dropped['structure_graphs']} more were left out" in dropped["note"]
    beyond = [g for g in doc["graphs"] if 3 <= g["iteration"] < 67 and g["iteration"] != 42]
    assert sum(len(g["nodes"]) for g in beyond) <= 600
    # nothing vanished: every node of the full run is listed, dropped or elided
    assert len(_op_nodes(doc)) < len(_op_nodes(everything)) / 5
    listed_or_counted = len(doc["nodes"]) + dropped["nodes"] + dropped.get("elided_nodes", 0)
    assert listed_or_counted == len(everything["nodes"])
    assert len(doc["nodes"]) <= 1500 + 100  # the document's cap (elision keeps roots and accumulators besides)
    validate(json.loads(json.dumps(doc)))  # the capped document is still a valid one


def test_the_document_cap_elides_the_graphs_alike_down_to_their_share(monkeypatch):
    monkeypatch.setattr(document, "DOCUMENT_NODE_LIMIT", 600)
    doc = traced(8, 60)  # 8 graphs of ~18-300 nodes, all in the two windows
    graphs = {g["iteration"]: g for g in doc["graphs"]}
    limit = document.graph_share([len(g["nodes"]) + (g.get("elided") or {}).get("nodes", 0)
                                  for g in doc["graphs"]], 600)
    assert 200 <= limit < 300
    for iteration, graph in graphs.items():
        size = len(graph["nodes"]) + (graph.get("elided") or {}).get("nodes", 0)
        assert ("elided" in graph) == (size > limit), iteration
    assert doc["dropped"]["elided_nodes"] == sum((g.get("elided") or {}).get("nodes", 0) for g in graphs.values())
    assert "the document holds at most about 600 nodes" in doc["dropped"]["note"]


def test_graph_share_gives_small_graphs_whole_and_cuts_the_big_ones_alike():
    assert document.graph_share([100, 200], 1000) == 5000  # everything fits: no cut
    assert document.graph_share([100, 1000, 3000], 1100) == 500  # 100 whole, then 1000 left for two graphs
    assert document.graph_share([10] * 50 + [10_000], 700) == 200  # never below the floor


def test_structures_past_the_list_cap_are_counted(monkeypatch):
    monkeypatch.setattr(document, "STRUCTURE_LIST_LIMIT", 10)
    doc = traced(40, 60)
    listed = {s["id"] for s in doc["structures"]}
    assert {g["structure"] for g in doc["graphs"]} <= listed  # every listed graph's structure is there
    assert len(listed) == max(10, len({g["structure"] for g in doc["graphs"]}))
    assert doc["dropped"]["structures"] == 40 - len(listed)
    assert sum(s["count"] for s in doc["structures"]) + doc["dropped"]["structure_count"] == 40


def test_a_long_run_at_the_default_caps_stays_far_under_20_MiB():
    episodes, longest = 150, 120  # ~65,000 nodes: about 60 MiB of report.json without the caps
    doc = traced(episodes, longest)
    size = len(json.dumps(doc, separators=(",", ":")))
    assert doc["dropped"]["structure_graphs"] > 0
    assert len(doc["nodes"]) <= document.DOCUMENT_NODE_LIMIT
    assert size < 20 * 2**20 and size < 15_000_000


# ----- pictures -----------------------------------------------------------------------------------------------
def _doc(structures, diagnosed=()):
    """A document with one graph per structure: ``structures`` = [node count...]; graph id = structure id."""
    graphs = [{"id": i, "structure": i, "iteration": i, "nodes": list(range(n)), "full": True}
              for i, n in enumerate(structures)]
    nodes = [{"id": 1000 + gid, "graph": gid} for gid in diagnosed]
    return {"graphs": graphs, "nodes": nodes, "variables": [],
            "structures": [{"id": i, "first_graph": i, "last_graph": i, "count": 1} for i in range(len(structures))],
            "diagnostics": [{"nodes": [1000 + gid]} for gid in diagnosed]}


def test_choose_pictures_takes_the_first_then_the_diagnosed_then_the_largest():
    sizes = [10, 50, 20, 400, 30, 300, 40, 5]
    drawn, listed = choose_pictures(_doc(sizes, diagnosed=[7, 2]), limit=5)
    assert [(p.structure, p.why) for p in drawn] == [(0, "first"), (2, "diagnosed"), (3, "largest"),
                                                     (5, "largest"), (7, "diagnosed")]
    assert [p.structure for p in listed] == [1, 4, 6]
    assert choose_pictures(_doc(sizes), limit=None)[1] == []


@pytest.fixture
def cli(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rl.py").write_text(RL_SCRIPT)
    runner = CliRunner(env={"COLUMNS": "100"})
    return lambda *args: runner.invoke(main, list(args), catch_exceptions=False)


@NEEDS_DOT
def test_a_long_run_draws_the_cap_of_pictures_and_a_report_that_fits_a_screen(cli, tmp_path):
    result = cli("run", "--torch", "--full", "--fail-on", "never", "--max-pictures", "4", "--out", "out", "rl.py",
                 "120", "60", "7")
    assert result.exit_code == 0, result.stderr
    drawn = sorted(p.name for p in (tmp_path / "out").glob("structure-*"))
    # the first graph, the episode the NaN diagnostic points at (7), the two longest episodes (42, 25)
    assert drawn == ["structure-0-iter0.svg", "structure-25-iter25.svg", "structure-42-iter42.svg",
                     "structure-7-iter7.svg"]
    manifest = json.loads((tmp_path / "out" / "report.json").read_text())["manifest"]
    not_drawn = manifest["pictures_not_drawn"]
    drawn_about = ("structure 0, iteration 0 ", "structure 7, iteration 7 ", "structure 25, iteration 25 ",
                   "structure 42, iteration 42 ")
    assert not [item for item in not_drawn if item["picture"].startswith(drawn_about)] and len(not_drawn) > 30
    assert all(item["reason"] == "not drawn: 4 pictures at most (--max-pictures)" for item in not_drawn)
    lines = result.stdout.splitlines()
    assert len(lines) <= 50
    assert "+56 more, see report.html" in [line.strip() for line in lines]  # 59 structures, 3 listed
    assert f"  +{len(not_drawn)} more pictures not drawn (--max-pictures 4), listed in report.json's manifest" \
        in lines
    assert sum(1 for line in lines if line.lstrip().startswith("structure ")) == 3


@NEEDS_DOT
def test_the_total_budget_stops_drawing_and_says_so(cli, tmp_path, monkeypatch):
    from gradviz.cli import artifacts

    ticks = iter(range(0, 10**6, 10))  # every look at the clock: 10 s later
    monkeypatch.setattr(artifacts, "_now", lambda: next(ticks))
    result = cli("run", "--torch", "--full", "--fail-on", "never", "--max-pictures", "9", "--render-budget", "25",
                 "--out", "out", "rl.py", "30", "12", "-1")
    assert result.exit_code == 0, result.stderr
    drawn = list((tmp_path / "out").glob("structure-*"))
    assert len(drawn) == 2  # at 10 s and 20 s of a 25 s budget; at 30 s it is spent
    manifest = json.loads((tmp_path / "out" / "report.json").read_text())["manifest"]
    reason = "not drawn: the 25 s budget for all pictures was spent (--render-budget)"
    skipped = manifest["skipped_pictures"]
    assert len(skipped) == 7 and all(item["reason"] == reason for item in skipped)
    assert not {item["file"] for item in skipped} & set(manifest["files"])
    notes = [line for line in result.stderr.splitlines() if reason in line]
    assert len(notes) == 6 and notes[-1] == f"gradviz: skipped 2 more pictures: {reason}"
    assert "25 s budget for all pictures was spent" in (tmp_path / "out" / "report.html").read_text()


# the benchmarks' tiny BERT (2 encoder layers written out, two AdamW steps): one model, measured and tested
TINY_BERT = (Path(__file__).resolve().parent.parent / "benchmarks" / "tiny_bert.py").read_text()


def png_size(data):
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


@NEEDS_DOT
def test_png_of_a_tiny_bert_is_drawn_from_its_layout_under_the_pixel_cap(cli, tmp_path, monkeypatch):
    (tmp_path / "bert.py").write_text(TINY_BERT)
    # what is checked is the path and the pixels, not the speed: no budget to miss on a loaded machine
    draw, laid_out = raster.draw, raster.laid_out
    monkeypatch.setattr(raster, "draw", lambda laid, fmt, timeout: draw(laid, fmt, 120))
    monkeypatch.setattr(raster, "laid_out", lambda doc, budget, **options: laid_out(doc, 120, **options))
    result = cli("run", "--engine", "torch", "--format", "png", "--out", "out", "bert.py")
    assert result.exit_code == 0, result.stderr
    manifest = json.loads((tmp_path / "out" / "report.json").read_text())["manifest"]
    assert manifest["skipped_pictures"] == [] and "pictures_as_svg" not in manifest
    data = (tmp_path / "out" / "structure-0-iter0.png").read_bytes()
    width, height = png_size(data)
    # ~130 nodes at 96 dpi would be ~3,700 x 7,500 pixels (27 million): drawn at the resolution that fits 8 million
    assert width * height <= raster.MAX_PIXELS and width > 1000 and height > 2 * width
    assert len(data) > 100_000
    assert "structure-0-iter0.png" in manifest["files"]
    assert "<svg" in (tmp_path / "out" / "report.html").read_text()  # the page's picture, from the same layout


def test_resolution_keeps_a_big_layout_under_the_pixel_cap_and_a_small_one_at_96_dpi():
    assert raster.resolution('graph [bb="0,0,300,200"];') == 96
    dpi = raster.resolution('graph [bb="0,0,2770,5611.4"];')

    def pixels(d):
        return (2770 / 72 * d) * (5611.4 / 72 * d)

    assert pixels(dpi) <= raster.MAX_PIXELS < pixels(dpi + 1)


@NEEDS_DOT
def test_a_png_past_its_drawing_budget_is_written_as_svg_with_a_note(cli, tmp_path, monkeypatch):
    real, sources = raster.draw, []

    def slow_png(laid, fmt, timeout, source=None):
        if fmt == "png":
            raise raster.RasterTimeout(f"drawing the laid-out graph as PNG took longer than {timeout:.1f} s")
        sources.append((fmt, source))
        return real(laid, fmt, timeout, source)

    monkeypatch.setattr(raster, "draw", slow_png)
    result = cli("run", "--torch", "--format", "png", "--out", "out", "rl.py", "1", "60", "-1")
    assert result.exit_code == 0, result.stderr
    assert [p.name for p in (tmp_path / "out").glob("structure-*")] == ["structure-0-iter0.svg"]
    manifest = json.loads((tmp_path / "out" / "report.json").read_text())["manifest"]
    assert manifest["pictures_as_svg"] == [{
        "file": "structure-0-iter0.png", "written": "structure-0-iter0.svg", "picture": "structure 0, iteration 0",
        "reason": "drawing the laid-out graph as PNG took longer than 4.0 s; written as SVG instead"}]
    assert "structure-0-iter0.svg" in manifest["files"] and "structure-0-iter0.png" not in manifest["files"]
    # the SVG is drawn with the DOT it was laid out from, so its clusters come in the DOT's order (cluster_order)
    assert sources and sources[0][0] == "svg" and sources[0][1].startswith("digraph {")
    assert re.search(r"gradviz: picture structure-0-iter0\.png \(structure 0, iteration 0\): drawing the laid-out "
                     r"graph as PNG took longer than 4\.0 s; written as SVG instead \(structure-0-iter0\.svg\)",
                     result.stderr)


def test_the_report_lists_the_gravest_diagnostics_and_counts_the_others():
    from gradviz.rendering.report import diagnostics_blocks
    from tests.synthetic_docs import DocBuilder
    from tests.test_render_report import text_of

    doc = DocBuilder().finish()
    doc["diagnostics"] = [{"code": f"code-{i}", "severity": severity, "message": f"message {i}",
                           "location": {"file": "train.py", "line": i, "text": ""}}
                          for i, severity in enumerate(["info", "warning", "error", "info", "error", "warning"])]
    text = text_of(diagnostics_blocks(doc))
    # the errors, then the first warning, each with its own hint
    shown = re.findall(r"(error|warning|info) +(code-\d)", text)
    assert shown == [("warning", "code-1"), ("error", "code-2"), ("error", "code-4")]
    assert re.findall(r"explain (code-\d)", text) == ["code-1", "code-2", "code-4"]
    assert "+3 more (1 warning, 2 infos), see report.html" in text
    assert text.startswith(" warning  code-1  train.py:1")  # the verdict above says how many


@pytest.mark.parametrize("args, message", [
    (["--max-pictures", "-1"], "Invalid value for '--max-pictures': -1 is not in the range x>=0"),
    (["--render-budget", "soon"], "Invalid value for '--render-budget': 'soon' is not a valid float range"),
])
def test_bad_caps_are_one_line_errors(args, message):
    result = CliRunner().invoke(main, ["run", *args, "rl.py"], prog_name="gradviz")
    assert result.exit_code == 2
    assert result.stderr == f"gradviz: error: {message} (see `gradviz run --help`)\n"
