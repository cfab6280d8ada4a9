"""report.html is written a piece at a time (rendering/html.html_parts, cli/artifacts._write_reports): the same
bytes as the page built whole, without holding the whole page, its escaped data and its encoded bytes at once."""

import io
import json
import tracemalloc

from gradviz.cli import artifacts, pipeline
from gradviz.rendering.html import html_parts, html_report, json_for_script, json_pieces_for_script
from tests.synthetic_docs import hostile_doc, loop_doc


def test_the_data_in_pieces_is_the_data_escaped_whole():
    data = {"names": ['</script><!-- ünï☃ \u2028 \u2029 & >'], "nodes": {1: {"op": "Mm"}, 2: None},
            "numbers": [1.5, -2, float(3)], "empty": {}}
    assert "".join(json_pieces_for_script(data)) == json_for_script(data)


def _written(doc, folder, pictures=None):
    artifacts._write_reports(doc, str(folder), pictures or {}, artifacts.Written(), pending=False, with_json=False)
    return (folder / "report.html").read_bytes()


def _picture_of_every_node(doc):
    """A stand-in picture naming every node (as dot's SVG names them): the page embeds all their details."""
    groups = "".join(f'<g id="gv-n{n["id"]}" class="node"><title>{n["op"]} ☃</title></g>' for n in doc["nodes"])
    return {"every node": f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 10 10">{groups}</svg>'}


def test_the_written_page_is_the_page_built_whole(tmp_path):
    for number, doc in enumerate((hostile_doc(), loop_doc(30))):
        folder = tmp_path / str(number)
        folder.mkdir()
        pictures = _picture_of_every_node(doc)
        page = _written(doc, folder, pictures)
        assert page == html_report(doc, pictures).encode("utf-8", "backslashreplace")
        assert b"</script><script>alert(1)" not in page


def _peak(function, *args):
    tracemalloc.start()
    try:
        function(*args)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_writing_a_long_runs_page_costs_little_beyond_building_its_pieces(tmp_path):
    doc = loop_doc(3000)
    pictures = _picture_of_every_node(doc)
    size = len(_written(doc, tmp_path, pictures))
    assert size > 2_000_000  # a page of a few MiB: its data and its picture
    built = _peak(html_parts, doc, pictures)
    written = _peak(_written, doc, tmp_path, pictures)
    # built whole, the page was also its joined text and its encoded bytes (~1.5x its size on top, here)
    assert written < built + size / 2, f"writing peaked at {written:,} bytes, building at {built:,}; page {size:,}"


class _Sink:
    """A stream that keeps nothing (a pipe read as it is written)."""

    def write(self, text):
        return len(text)


def _indented_json_peak(write, doc):
    tracemalloc.start()
    try:
        write(_Sink(), doc)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_json_only_writes_the_indented_document_in_batches():
    doc = loop_doc(3000)
    out = io.StringIO()
    pipeline.write_indented_json(out, doc)
    text = json.dumps(doc, indent=1) + "\n"  # what --json-only printed, whole
    assert out.getvalue() == text
    peak = _indented_json_peak(pipeline.write_indented_json, doc)
    # whole, json.dumps kept each of the encoder's small pieces before joining them: several times the text
    assert peak < len(text) / 2, f"peak {peak:,} bytes for {len(text):,} characters of JSON"
