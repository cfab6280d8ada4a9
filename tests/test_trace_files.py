"""Hostile and damaged trace files: readers tolerate what docs/trace-format.md says they tolerate (ids naming
dropped records), and everything else is refused in one line — never a traceback, whatever the file holds."""

import io
import json
import subprocess
import sys

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

import gradviz
from gradviz.cli import main
from gradviz.diagnose import diagnose
from gradviz.document import TraceFormatError, load_trace, parse
from gradviz.rendering import report
from gradviz.rendering.dot import to_dot
from gradviz.rendering.graph import build_graph
from gradviz.rendering.html import report_data


def _traced_document():
    with gradviz.trace() as tr:
        model = gradviz.nn.Linear(3, 2)
        opt = gradviz.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(2):
            opt.zero_grad()
            x = gradviz.randn(4, 3)
            loss = (model(x).relu() * 2).sum()
            loss.backward()
            opt.step()
        cut = x.data
        (model(cut) * 1).sum().backward()
    return json.loads(json.dumps(tr.to_dict()))


DOC = _traced_document()


def fresh():
    return json.loads(json.dumps(DOC))


def read_everything(doc):
    """What `gradviz graph`, the terminal report and the diagnostics read of a document."""
    diagnose(doc)
    for forward in (False, True):
        try:
            to_dot(build_graph(doc, forward=forward, show_saved=True, show_grads=True))
        except ValueError as exc:  # the one documented refusal: no graph in the chosen iteration
            assert str(exc).startswith("no graph"), exc
    console = Console(file=io.StringIO(), width=100)
    for part in report.terminal_report(doc):
        console.print(part)
    report_data(doc)


def graph_cli(path, *args):
    result = CliRunner().invoke(main, ["graph", str(path), *args])
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), (
        f"gradviz graph raised {result.exception!r}")
    return result


def one_line_error(result):
    lines = result.output.strip().splitlines()
    assert result.exit_code != 0 and len(lines) == 1 and "Traceback" not in result.output, result.output
    return lines[0]


# -- missing ids (records dropped by the window, or lost) ------------------------------------------------------
def test_an_accumulator_naming_a_missing_variable_is_drawn_by_its_id(tmp_path):
    doc = fresh()
    accumulated = {n["variable"] for n in doc["nodes"] if n["op"] == "AccumulateGrad"}
    assert accumulated
    doc["variables"] = [v for v in doc["variables"] if v["id"] not in accumulated]
    path = tmp_path / "dropped.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    loaded = load_trace(path)
    read_everything(loaded)
    source = to_dot(build_graph(loaded))
    assert all(f"v{vid}" in source for vid in accumulated if any(
        n["variable"] == vid and n["id"] in loaded["graphs"][-1]["nodes"] for n in loaded["nodes"]))
    result = graph_cli(path, "-o", str(tmp_path / "g.dot"))
    assert result.exit_code == 0, result.output
    assert (tmp_path / "g.dot").read_text(encoding="utf-8").startswith("digraph")


@pytest.mark.parametrize("kind", ["variables", "nodes", "graphs", "events", "backwards", "structures"])
def test_every_record_kind_may_be_missing(kind):
    doc = fresh()
    for keep in (lambda i: i % 2 == 0, lambda i: i % 2 == 1, lambda i: False):
        doc[kind] = [r for i, r in enumerate(fresh()[kind]) if keep(i)]
        read_everything(parse(json.dumps(doc)))


# -- deep nesting ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '{"a":' * 100_000 + "1" + "}" * 100_000])
def test_a_document_nested_100000_levels_deep_is_one_line_error(tmp_path, text):
    path = tmp_path / "deep.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(TraceFormatError) as info:
        load_trace(path)
    assert str(info.value) == (f"{path}: nested too deeply to be a trace document (its records nest a few levels, "
                               "free-form fields at most 64)")
    assert one_line_error(graph_cli(path)).startswith(f"gradviz: error: invalid trace `{path}`: nested too deeply")


def test_deep_free_form_fields_are_refused_by_name():
    doc = fresh()
    doc["nodes"][0]["meta"]["x"] = "@"
    text = json.dumps(doc)
    with pytest.raises(TraceFormatError, match=r"^nodes\[0\]\.meta: nested more than 64 levels deep$"):
        parse(text.replace('"@"', "[" * 500 + "]" * 500))
    parse(text.replace('"@"', "[" * 60 + "]" * 60))  # deep enough for any real metadata


# -- strict JSON -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_tokens_are_refused_naming_their_position(tmp_path, token):
    doc = fresh()
    doc["memory"]["peak_retained_bytes"] = "@"
    doc["variables"][0]["name"] = "NaN Infinity"  # inside a string they are just text
    text = json.dumps(doc, indent=1).replace('"@"', token)
    line = next(i for i, s in enumerate(text.splitlines(), 1) if '"peak_retained_bytes"' in s)
    column = text.splitlines()[line - 1].index(token) + 1
    path = tmp_path / "nan.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(TraceFormatError) as info:
        load_trace(path)
    assert str(info.value) == (f'{path}: not strict JSON ({token} at line {line} column {column}; the format writes '
                               'non-finite numbers as the strings "nan", "inf", "-inf")')
    assert f"({token} at line {line} column {column};" in one_line_error(graph_cli(path))


def test_non_finite_numbers_as_the_format_writes_them_load():
    doc = fresh()
    doc["backwards"][0]["grad_norms"] = {k: "nan" for k in doc["backwards"][0]["grad_norms"]}
    doc["variables"][0]["name"] = "NaN"
    read_everything(parse(json.dumps(doc)))


def test_norms_must_be_keyed_by_ids():
    doc = fresh()
    doc["backwards"][0]["leaf_grad_norms"]["w"] = 1.0
    with pytest.raises(TraceFormatError, match=r"^backwards\[0\]\.leaf_grad_norms\.w: expected an id"):
        parse(json.dumps(doc))


def test_edges_are_pairs():
    doc = fresh()
    node = next(n for n in doc["nodes"] if n["inputs"])
    node["inputs"][0] = [node["inputs"][0][0]]
    with pytest.raises(TraceFormatError, match=r"^nodes\[\d+\]\.inputs\[0\]: expected a list of 2 items$"):
        parse(json.dumps(doc))


@pytest.mark.parametrize("content,message", [
    (b"", "not JSON (Expecting value at line 1 column 1)"),
    (b"\xff\xfe\x00binary", "not a text file (expected a gradviz trace in JSON)"),
    (b'{"format": "gradviz-trace", "version": 1, "x": ' + b"9" * 5000 + b"}", "not a valid trace in JSON"),
    (b"[]", "expected a JSON object at the top level"),
    (b'{"format": "gradviz-trace", "version": 2}', "unsupported version 2"),
])
def test_other_bad_files_are_one_line_errors(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(TraceFormatError, match="^[^\n]*$") as info:
        load_trace(path)
    assert message in str(info.value)
    assert message in one_line_error(graph_cli(path))


def test_a_folder_named_like_a_trace_is_a_one_line_error(tmp_path):
    (tmp_path / "dir.json").mkdir()
    assert "invalid trace" in one_line_error(graph_cli(tmp_path / "dir.json"))


def test_gradviz_graph_in_a_real_process_prints_one_line(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "gradviz", "graph", str(path)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith(f"gradviz: error: invalid trace `{path}`: nested too deeply")


# -- fuzzing: random damage either loads and reads cleanly, or is one line --------------------------------------
TEXT = json.dumps(DOC)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, len(TEXT)), st.integers(0, 3), st.sampled_from(
    ["", "{", "}", "[", "]", ",", ":", '"', "0", "-1", "null", "NaN", "1e999", "\\", "\x00", "\u2028", "é"])),
    min_size=1, max_size=4))
def test_damaged_text_loads_or_fails_in_one_line(edits):
    text = TEXT
    for at, cut, insert in sorted(edits, reverse=True):
        text = text[:at] + insert + text[at + cut:]
    try:
        doc = parse(text)
    except TraceFormatError as exc:
        assert "\n" not in str(exc)
        return
    read_everything(doc)


_ID_FIELDS = ("id", "node", "accumulator", "source", "variable", "graph", "structure", "freed_by", "result",
              "gradient_from", "first_graph", "last_graph")


def _id_slots(obj, path=()):
    """Paths of every integer or null that may be an id (fields above, and items of id lists)."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            if key in _ID_FIELDS and (value is None or type(value) is int):
                yield path + (key,)
            elif isinstance(value, list) and value and all(v is None or type(v) is int for v in value):
                yield from (path + (key, i) for i in range(len(value)))
            else:
                yield from _id_slots(value, path + (key,))
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            yield from _id_slots(value, path + (i,))


SLOTS = list(_id_slots(DOC))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(drops=st.dictionaries(st.sampled_from(["variables", "nodes", "graphs", "events", "backwards", "structures",
                                               "diagnostics"]), st.sets(st.integers(0, 40), max_size=6)),
       rewires=st.lists(st.tuples(st.sampled_from(SLOTS), st.one_of(st.none(), st.integers(-2, 60))), max_size=6))
def test_dangling_and_rewired_ids_never_break_a_reader(drops, rewires):
    doc = fresh()
    for path, value in rewires:
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        parent[path[-1]] = value
    for kind, positions in drops.items():
        doc[kind] = [r for i, r in enumerate(doc[kind]) if i not in positions]
    try:
        doc = parse(json.dumps(doc))
    except TraceFormatError as exc:  # e.g. a null where the schema wants an id
        assert "\n" not in str(exc)
        return
    read_everything(doc)


def test_a_hostile_file_name_is_shown_inert(tmp_path):
    path = tmp_path / "t\x1b[2J\r.json"
    path.write_text("[1]", encoding="utf-8")
    line = one_line_error(graph_cli(path))
    assert line == (f"gradviz: error: invalid trace `{tmp_path}/t\\x1b[2J\\r.json`: document: expected a JSON "
                    "object at the top level")
