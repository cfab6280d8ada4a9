"""A PNG or PDF picture is drawn from its layout by a ``dot -Kneato -n2`` process the run's ``dot_session`` starts
once, with the page's SVG of the same layout beside it when the page draws one: no ``dot`` started per
picture after the shared layout, and the bytes of a plain ``dot -Kneato -n2`` run."""

import subprocess

import pytest

from gradviz.rendering import dot_session, layout, raster
from tests.test_render_one_layout import _counting_popen, module_doc

needs_dot = pytest.mark.skipif(not layout.dot_available(), reason="Graphviz dot is not installed")


def laid(source):
    return layout.run_dot(source, "dot", 30).decode("utf-8")


SMALL = ["digraph {\n\tsubgraph cluster_0 {\n\t\tgraph [id=\"gv-c0\"]\n\t\ta -> b\n\t}\n\tb -> c\n}\n",
         "digraph {\n\tx -> y -> z\n\tx -> z\n}\n"]
# about 5,000 x 5,000 points: over MAX_PIXELS at 96 dpi, so drawn at a lower resolution
HUGE = "digraph {\n\tbig [shape=box, width=70, height=70, fixedsize=true]\n\tbig -> small\n}\n"


@needs_dot
def test_pngs_in_a_session_are_one_process_s_drawings_byte_for_byte_and_their_svgs_come_along(monkeypatch):
    layouts = [laid(source) for source in SMALL + [HUGE]]
    plain = [raster.draw(text, "png", 30) for text in layouts]
    plain_svg = [raster.draw(text, "svg", 30) for text in layouts]
    assert raster.resolution(layouts[2]) < raster.DPI
    started = _counting_popen(monkeypatch)
    with dot_session.session() as session:
        drawn = [raster.draw(text, "png", 30) for text in layouts]
        kept = dict(session.drawn)
        svgs = [raster.draw(text, "svg", 30) for text in layouts]
    assert drawn == plain and svgs == plain_svg
    # the small ones' SVGs were drawn with their PNGs; the big one's resolution would scale its SVG: apart
    assert set(kept) == {("svg", layouts[0]), ("svg", layouts[1])}
    assert sorted(args[1:] for args in started) == [["-Tpng", "-Kneato", "-n2"], ["-Tpng", "-Tsvg", "-Kneato", "-n2"],
                                                    ["-Tsvg", "-Kneato", "-n2"]]


@needs_dot
def test_a_run_writing_a_png_lays_it_out_once_and_draws_the_png_and_the_pages_view_in_one_process(tmp_path,
                                                                                                  monkeypatch):
    from gradviz.cli.artifacts import write_all

    doc = module_doc()
    text = laid(layout.lay_out(doc, "dot", 30)[1])
    png = raster.draw(text, "png", 30)
    started = _counting_popen(monkeypatch)
    write_all(doc, str(tmp_path), fmt="png")
    assert (tmp_path / "structure-0-iter0.png").read_bytes() == png
    drawers = [args[1:] for args in started if "-Kneato" in args]
    # before: one for the PNG, one for the SVG the page draws of it (to see whether it reads at fit)
    assert drawers == [["-Tpng", "-Tsvg", "-Kneato", "-n2"]]
    assert [args[1:] for args in started if "-Kneato" not in args][0] == ["-Tdot"]   # the one layout


@needs_dot
def test_a_pdf_is_drawn_by_the_sessions_process_too():
    text = laid(SMALL[0])
    with dot_session.session() as session:
        pdf = raster.draw(text, "pdf", 30)
        assert list(session.idle) == [("drawn", "pdf", "svg")]
    assert pdf.startswith(b"%PDF") and pdf.endswith(b"%%EOF\n")
    assert subprocess.run(["dot", "-Tpdf", "-Kneato", "-n2"], input=text.encode(), capture_output=True,
                          check=True).stdout[:9] == pdf[:9]
