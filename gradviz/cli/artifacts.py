"""Write what ``gradviz run`` leaves behind: one picture per distinct graph structure, report.json, report.html.

Everything is drawn from the trace document. When Graphviz's ``dot`` program is missing, the ``.dot`` sources
are written instead of pictures and the caller says in one line how to get them.
"""

import json
import os
from dataclasses import dataclass, field

FORMATS = ("svg", "png", "pdf", "dot")
DOT_MISSING_HINT = ("Graphviz's `dot` program was not found, so the graphs were written as .dot sources; "
                    "install it to get pictures (Debian/Ubuntu: `sudo apt-get install graphviz`, macOS: "
                    "`brew install graphviz`, conda: `conda install graphviz`)")


class OutputFolderError(Exception):
    """The output folder cannot be created or written (one-line message)."""


@dataclass
class Written:
    paths: list = field(default_factory=list)
    dot_missing: bool = False


@dataclass
class Picture:
    graph: int
    structure: int
    iteration: int
    stem: str


def pictures_to_draw(doc):
    """One picture per distinct graph structure: its first graph, and its last one when that is another graph
    whose nodes were kept."""
    graphs = {g["id"]: g for g in doc.get("graphs", [])}
    pictures = []
    for structure in doc.get("structures", []):
        sid = structure["id"]
        chosen = [structure["first_graph"]]
        last = structure.get("last_graph")
        if last is not None and last != structure["first_graph"] and graphs.get(last, {}).get("full", True):
            chosen.append(last)
        for gid in chosen:
            graph = graphs.get(gid)
            if graph is None or not graph.get("full", True):
                continue
            iteration = graph.get("iteration", 0)
            pictures.append(Picture(gid, sid, iteration, f"graph-{sid + 1}-iter{iteration}"))
    return pictures


def prepare_folder(out_dir):
    """Create ``out_dir`` (and parents) and check it is writable."""
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as exc:
        raise OutputFolderError(f"cannot create output folder `{out_dir}`: {exc.strerror or exc}") from None
    if not os.path.isdir(out_dir) or not os.access(out_dir, os.W_OK | os.X_OK):
        raise OutputFolderError(f"output folder `{out_dir}` is not writable")


def write_all(doc, out_dir, fmt="svg", draw=True, render_options=None):
    """Write the pictures (unless ``draw`` is false), report.json and report.html into ``out_dir``."""
    prepare_folder(out_dir)
    written = Written()
    svgs = {}
    if draw:
        svgs = _write_pictures(doc, out_dir, fmt, render_options or {}, written)
    json_path = os.path.join(out_dir, "report.json")
    _write_text(json_path, json.dumps(doc, indent=1, sort_keys=False, default=_json_default))
    written.paths.append(json_path)
    html_path = os.path.join(out_dir, "report.html")
    _write_text(html_path, _html(doc, svgs))
    written.paths.append(html_path)
    return written


def _write_pictures(doc, out_dir, fmt, options, written):
    from .. import render as render_module  # noqa: F401 - loads gradviz.render lazily
    from ..render import dot_available, render

    can_draw = dot_available()
    written.dot_missing = not can_draw and fmt != "dot"
    svgs = {}
    for picture in pictures_to_draw(doc):
        graph = render(doc, graph=picture.graph, **options)
        if fmt == "dot" or not can_draw:
            path = os.path.join(out_dir, picture.stem + ".dot")
            _write_text(path, graph.source)
        else:
            path = os.path.join(out_dir, f"{picture.stem}.{fmt}")
            _write_bytes(path, graph.pipe(format=fmt))
        written.paths.append(path)
        if can_draw:
            svgs[picture.stem] = graph.pipe(format="svg").decode("utf-8") if fmt != "svg" else _read(path)
    return svgs


def _html(doc, svgs):
    from ..render import html_report

    return html_report(doc, svgs)


def _write_text(path, text):
    _write_bytes(path, text.encode("utf-8"))


def _write_bytes(path, data):
    try:
        with open(path, "wb") as f:
            f.write(data)
    except OSError as exc:
        raise OutputFolderError(f"cannot write `{path}`: {exc.strerror or exc}") from None


def _read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def _json_default(value):
    # numpy scalars can slip into figures; JSON wants plain numbers
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
