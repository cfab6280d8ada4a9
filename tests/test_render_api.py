"""gradviz.render(): formats, files, the layout budget, and life without Graphviz's dot."""

import subprocess
import sys

import pytest

import gradviz
from gradviz.rendering import (
    DOT_MISSING,
    DotNotFoundError,
    LayoutTimeout,
    build_graph,
    dot_available,
    layout,
    render,
    to_dot,
)
from tests.synthetic_docs import chained_models_doc, loop_doc

needs_dot = pytest.mark.skipif(not dot_available(), reason="Graphviz dot is not installed")


def test_dot_format_needs_no_dot_and_returns_a_digraph(tmp_path):
    import graphviz

    doc = chained_models_doc()
    graph = render(doc, tmp_path / "g.dot")
    assert isinstance(graph, graphviz.Digraph)
    assert graph.source == to_dot(build_graph(doc))
    assert (tmp_path / "g.dot").read_text(encoding="utf-8") == graph.source


@needs_dot
@pytest.mark.parametrize("fmt,magic", [("svg", b"<?xml"), ("png", b"\x89PNG"), ("pdf", b"%PDF")])
def test_writes_each_picture_format(tmp_path, fmt, magic):
    render(chained_models_doc(), tmp_path / "pic", format=fmt)
    assert (tmp_path / f"pic.{fmt}").read_bytes().startswith(magic)


@needs_dot
def test_format_from_suffix_and_inline_svg(tmp_path):
    graph = render(chained_models_doc(), tmp_path / "out.png")
    assert (tmp_path / "out.png").read_bytes().startswith(b"\x89PNG")
    svg = render(chained_models_doc())._repr_mimebundle_()["image/svg+xml"]
    assert 'id="gv&#45;n3"' in svg and "AddmmBackward" in svg
    assert graph._repr_image_svg_xml().lstrip().startswith("<?xml")  # not cached for png: laid out again


def test_unknown_format_is_a_clear_error():
    with pytest.raises(ValueError, match=r"unknown picture format 'gif': use one of svg, png, pdf, dot"):
        render(chained_models_doc(), format="gif")


def test_rejects_things_that_are_not_traces():
    for draw in (render, gradviz.render):
        with pytest.raises(ValueError, match="not a gradviz trace document"):
            draw({"format": "other"})
    with pytest.raises(TypeError, match="^render\\(\\) takes a trace document, a JSON path, a trace \\(anything with "
                                        "to_dict\\(\\)\\), a Variable \\(or a list of them\\), a torch tensor \\(or a "
                                        "list of them\\), not int$"):
        gradviz.render(42)
    # rendering itself reads documents only, and says where the rest is taken
    with pytest.raises(TypeError, match="gradviz.render\\(\\) also takes Variables, traces and paths"):
        render(gradviz.ones(2))


def test_missing_dot_writes_source_and_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "nothing-here"))  # no dot on it (nor anything else)
    with pytest.raises(DotNotFoundError) as info:
        render(chained_models_doc(), tmp_path / "g.svg")
    message = str(info.value)
    assert message == DOT_MISSING and "\n" not in message
    assert "apt-get install graphviz" in message and "brew install graphviz" in message
    assert "conda install graphviz" in message
    assert info.value.dot_path == str(tmp_path / "g.dot")
    assert (tmp_path / "g.dot").read_text(encoding="utf-8").startswith("digraph {")
    assert not dot_available()


def test_layout_budget_falls_back_to_cheaper_settings_then_collapsed(monkeypatch):
    calls = []

    def fake_run(source, fmt, timeout):
        calls.append(("splines" in source.split("\n")[1], source.count("[id=")))
        if len(calls) < 3:
            raise LayoutTimeout("too slow")
        return b"<svg/>"

    monkeypatch.setattr(layout, "run_dot", fake_run)
    spec, source, data = layout.lay_out(loop_doc(40), "svg", budget=1.0, fold_loops=False)
    assert data == b"<svg/>"
    assert [cheap for cheap, _ in calls] == [False, True, True]
    assert calls[2][1] < calls[0][1]                       # the third attempt draws the collapsed view
    assert spec.subtitle[-1] == "collapsed view: the full graph did not lay out within 1.0 s"
    assert 'splines="line"' in source


def test_layout_gives_up_with_a_clear_message(monkeypatch):
    def never(source, fmt, timeout):
        raise LayoutTimeout("too slow")

    monkeypatch.setattr(layout, "run_dot", never)
    with pytest.raises(LayoutTimeout, match="did not lay out within the 1.0 s budget, even collapsed"):
        layout.lay_out(loop_doc(5), "svg", budget=1.0)


@needs_dot
def test_run_dot_times_out_instead_of_hanging():
    edges = "".join(f"a{i} -> b{j};" for i in range(60) for j in range(60))
    with pytest.raises(LayoutTimeout, match="dot took longer than 0.1 s"):
        layout.run_dot("digraph {" + edges + "}", "svg", timeout=0.1)
    assert subprocess.run(["pgrep", "-f", "a59 -> b59"], capture_output=True).stdout == b""


def test_render_reads_a_json_path(tmp_path):
    with gradviz.trace() as tr:
        w = gradviz.randn(3, requires_grad=True)
        (w * 2).sum().backward()
    path = tr.to_json(tmp_path / "t.json")
    graph = gradviz.render(str(path), format="dot")
    assert graph.source == render(tr.to_dict(), format="dot").source and "MulBackward" in graph.source
    assert gradviz.render(path, format="dot").source == graph.source  # a PathLike too


@needs_dot
def test_inline_display_in_a_plain_python_process(tmp_path):
    # What Jupyter calls to show a result, checked without Jupyter: the Digraph render() returns and a trace.
    script = tmp_path / "show.py"
    script.write_text(
        "import gradviz\n"
        "with gradviz.trace() as tr:\n"
        "    w = gradviz.randn(3, requires_grad=True)\n"
        "    loss = (w * 2).sum()\n"
        "    loss.backward()\n"
        "g = gradviz.render(tr)\n"
        "bundle = g._repr_mimebundle_()\n"
        "print(sorted(bundle))\n"
        "print(bundle['image/svg+xml'] == g._repr_svg_())\n"
        "print(g._repr_svg_().count('<svg'), 'MulBackward' in g._repr_svg_())\n"
        "print(gradviz.render(loss)._repr_svg_().count('<svg'))\n"
        "html = gradviz.rendering.notebook_html(tr)\n"
        "print(html.startswith('<div class=\"gradviz-trace\">'), html.count('<svg'))\n"
        "print(getattr(tr, '_repr_html_', None) is None or '<svg' in tr._repr_html_())\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["['image/svg+xml']", "True", "1 True", "1", "True 1", "True"]
