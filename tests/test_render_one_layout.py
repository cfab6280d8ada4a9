"""Issue 27's "one layout": report.html's views below a picture draw each node of a long chain once, a window
at a time, and every layout of a run goes to ``dot`` processes started once (``rendering/dot_session.py``)."""

import re
import subprocess

import pytest

from gradviz.rendering import dot_session, layout
from gradviz.rendering.views import _Opening, _outer_loops, page_views
from tests.synthetic_docs import DocBuilder

needs_dot = pytest.mark.skipif(not layout.dot_available(), reason="Graphviz dot is not installed")
_DRAWN = re.compile(r'id="gv&#45;n(\d+)" class="node"')
_MORE = re.compile(r"… ([\d,]+) more nodes")


def chain_doc(steps):
    """``steps`` ops in one chain (nothing folds: no step repeats the one 7 before it at every 11th) on one input."""
    b = DocBuilder("chain.py")
    y = b.leaf("x", (8,))
    for step in range(steps):
        y = b.op(f"Op{step % 7}Backward0" if step % 11 else f"Odd{step}Backward0", [y], (8,))
    b.backward(b.op("SumBackward0", [y], ()))
    return b.finish()


def svg_of(view):
    """A view's SVG (a top view) or graph data (a part view, which the page lays out), as embedded."""
    import base64
    import zlib

    return view.svg if view.svg is not None else zlib.decompress(base64.b64decode(view.packed)).decode("utf-8")


def drawn_nodes(view):
    """The document node ids a view draws under their own id: from its SVG, or from its graph data."""
    import json

    if view.svg is not None:
        return [int(i) for i in _DRAWN.findall(view.svg)]
    return [int(n[0][4:]) for n in json.loads(svg_of(view))["nodes"] if re.fullmatch(r"gv-n\d+", n[0])]


@needs_dot
def test_a_long_chain_is_drawn_window_after_window_each_node_once_and_every_box_counts_what_it_holds():
    doc = chain_doc(2600)
    ops = {n["id"] for n in doc["nodes"]}
    views, notes = page_views(doc)
    assert notes == [] and all(v.error is None for v in views)
    drawn = {v.key: drawn_nodes(v) for v in views}
    below = [v for v in views if v.parent is not None]
    # every op drawn under its own id, in one view only below the top one: 2,601 ops in 6 windows of <= 500
    assert set().union(*map(set, drawn.values())) == ops
    seen = [i for v in below for i in drawn[v.key]]
    assert len(seen) == len(set(seen)) and len(below) == 5
    assert all(len(drawn[v.key]) <= 500 for v in views)
    # each "… N more nodes" box says how many the views it leads to draw, all of them, not its window's part
    for view in views:
        counts = [int(c.replace(",", "")) for c in _MORE.findall(svg_of(view))]
        if not counts:
            continue
        later, key = set(), view.key + "-more"
        while key in drawn:
            later |= set(drawn[key])
            key += "-more"
        assert counts[0] == len(later), view.key


def test_a_loop_inside_a_loop_opens_the_outer_loops_view():
    inner = _Opening("gv-cluster_0", "loop × 1000 unfolded", list(range(10, 20)), "loop")
    middle = _Opening("gv-cluster_1", "loop × 7 unfolded", list(range(0, 30)), "loop")
    outer = _Opening("gv-cluster_2", "loop × 87 unfolded", list(range(0, 40)), "loop")
    apart = _Opening("gv-cluster_3", "loop × 4 unfolded", list(range(35, 50)), "loop")
    module = _Opening("gv-b0", "net", list(range(0, 60)), "module")
    assert _outer_loops([inner, middle, outer, apart, module]) == {"gv-cluster_0": "gv-cluster_2",
                                                                    "gv-cluster_1": "gv-cluster_2"}


def _counting_popen(monkeypatch):
    started = []
    real = subprocess.Popen

    def popen(args, *rest, **kwargs):
        started.append(list(args))
        return real(args, *rest, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", popen)
    return started


@needs_dot
def test_a_session_lays_out_graph_after_graph_in_one_dot_and_gives_what_a_plain_run_gives(monkeypatch):
    sources = ["digraph {\n\ta -> b\n}\n", "digraph {\n\tc -> d -> e\n}\n",
               "digraph {\n\tx\n}\ndigraph {\n\ty -> z\n}\n"]
    plain = [layout.run_dot(source, "svg", 10) for source in sources]
    started = _counting_popen(monkeypatch)
    with dot_session.session() as session:
        laid = [layout.run_dot(source, "svg", 10) for source in sources]
        assert len(session.idle["svg"]) == 1
    assert laid[:2] == plain[:2] and laid[2].count(b"</svg>") == 2   # (a graph is named as a fresh dot names it)
    def unnamed(svg):
        return re.sub(rb"%\d+|page\d+,\d+_", b"", svg)
    assert [unnamed(svg) for svg in laid] == [unnamed(svg) for svg in plain]
    assert [args[1:] for args in started] == [["-Tsvg"]]       # one dot started for the four graphs


@needs_dot
def test_a_png_or_pdfs_layout_goes_to_the_sessions_dot_and_is_what_a_plain_dot_tdot_gives(monkeypatch):
    # (``raster.laid_out``: ``dot -Tdot`` writes the positions a PNG is then drawn from)
    sources = ["digraph {\n\tsubgraph cluster_0 {\n\t\ta -> b\n\t}\n\tb -> c\n}\n",
               "digraph {\n\tc -> d -> e\n\te [label=\"}\\n}\"]\n}\n"]   # a label that reads like an end
    plain = [layout.run_dot(source, "dot", 10) for source in sources]
    started = _counting_popen(monkeypatch)
    with dot_session.session() as session:
        laid = [layout.run_dot(source, "dot", 10) for source in sources]
        svg = layout.run_dot(sources[0], "svg", 10)
        assert len(session.idle["dot"]) == 1 and len(session.idle["svg"]) == 1
    assert laid == plain and b'bb="' in laid[0] and b"</svg>" in svg
    assert sorted(args[1:] for args in started) == [["-Tdot"], ["-Tsvg"]]   # one dot a format, for all graphs


@needs_dot
def test_a_graph_dot_rejects_in_a_session_fails_with_dots_message_and_the_next_one_still_lays_out():
    with dot_session.session() as session:
        with pytest.raises(RuntimeError, match=r"^dot failed: .*syntax error"):
            layout.run_dot("digraph {\n\ta -> \n}\n", "svg", 10)
        assert session.idle == {"svg": []}                                # the process that exited is not reused
        assert layout.run_dot("digraph {\n\ta -> b\n}\n", "svg", 10).rstrip().endswith(b"</svg>")


@needs_dot
def test_a_layout_past_its_time_in_a_session_is_a_layout_timeout_and_its_dot_is_killed(monkeypatch):
    started = _counting_popen(monkeypatch)
    edges = "".join(f"\tn{i} -> n{(i * 7919) % 4000}\n\tn{i} -> n{(i * 104729) % 4000}\n" for i in range(4000))
    with dot_session.session() as session:
        with pytest.raises(layout.LayoutTimeout, match="longer than 0.1 s"):
            layout.run_dot("digraph {\n" + edges + "}\n", "svg", timeout=0.1)
        assert session.idle == {"svg": []}
    assert len(started) == 1


@needs_dot
def test_a_page_lays_out_only_its_top_view_and_leaves_the_views_below_to_the_page(monkeypatch):
    started = _counting_popen(monkeypatch)
    views, _ = page_views(chain_doc(1400))
    assert len(views) == 3 and views[0].svg and views[0].graph_data is None
    assert all(v.svg is None and v.graph_data for v in views[1:])   # laid out by the page when opened
    assert [args[1:] for args in started] == [["-Tsvg"]]            # one dot, for the top view


def module_doc(ops=24):
    """``ops`` ops in a module ``net`` and the loss outside it: a picture too tall to read at fit, so the page
    opens on an overview (the ``net`` box, the loss)."""
    b = DocBuilder("small.py")
    b.module("net", "Net")
    y = b.op("MulBackward0", [b.leaf("x", (4,), requires_grad=False), b.leaf("net.w", (4,), parameter=True)], (4,),
             module=["net"])
    for step in range(ops - 1):
        y = b.op(f"Op{step}Backward0", [y], (4,), module=["net"])
    b.backward(b.op("MseLossBackward0", [y], ()))
    return b.finish()


@needs_dot
def test_the_box_holding_the_whole_model_opens_its_graph_and_the_run_lays_out_only_the_picture(tmp_path,
                                                                                                  monkeypatch):
    import json

    from gradviz.cli.artifacts import write_all

    started = _counting_popen(monkeypatch)
    write_all(module_doc(), str(tmp_path), fmt="svg")
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    data = json.loads(page.split('id="gv-data">')[1].split("</script>")[0])
    views = [(v["key"], v["title"], v["boxes"]) for v in data["views"]]
    (top, top_title, boxes), (inside, inside_title, inner) = views  # the graph, and the model's box opened
    assert (top, top_title, inside_title, inner) == ("g0", "structure 0, iteration 0 · graph 0", "net", [])
    # one box, the model's, whose view is keyed by it (its number is the page's count of boxes so far)
    assert len(boxes) == 1 and inside == "g0-" + boxes[0].removeprefix("gv-")
    box = json.loads(dict(page_views_of(data))[inside])   # graph data, laid out by the page when opened
    in_file = set(_DRAWN.findall((tmp_path / "structure-0-iter0.svg").read_text(encoding="utf-8")))
    in_net = {str(n["id"]) for n in module_doc()["nodes"] if n.get("module") == ["net"]}
    drawn = {n[0][4:] for n in box["nodes"] if re.fullmatch(r"gv-n\d+", n[0])}
    assert drawn == in_net and in_net <= in_file             # every op of the box, as the picture file has them
    assert len(started) == 1                                 # the file and the page's overview: one dot process


def page_views_of(data):
    import base64
    import zlib

    return [(key, zlib.decompress(base64.b64decode(text)).decode("utf-8")) for key, text in data["packed"].items()]
