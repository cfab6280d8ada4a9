"""Write what ``gradviz run`` leaves behind: one picture per distinct graph structure, report.json, report.html.

Everything is drawn from the trace document. When Graphviz's ``dot`` program is missing, the ``.dot`` sources
are written instead of pictures and the caller says in one line how to get them.
"""

import os
from dataclasses import dataclass, field

FORMATS = ("svg", "png", "pdf", "dot")


class OutputFolderError(Exception):
    """The output folder cannot be created or written (one-line message)."""


@dataclass
class Written:
    paths: list = field(default_factory=list)
    dot_missing: bool = False
    about: dict = field(default_factory=dict)  # path -> what it shows ("structure 0, iteration 0 (first of 30)")


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
    from ..rendering.html import html_report
    from ..tracing import TraceDocument

    prepare_folder(out_dir)
    written = Written()
    pictures = _write_pictures(doc, out_dir, fmt, render_options or {}, written) if draw else {}
    json_path = os.path.join(out_dir, "report.json")
    try:
        TraceDocument(doc).to_json(json_path)
    except OSError as exc:
        raise OutputFolderError(f"cannot write `{json_path}`: {exc.strerror or exc}") from None
    written.paths.append(json_path)
    html_path = os.path.join(out_dir, "report.html")
    _write_text(html_path, html_report(doc, pictures))
    written.paths.append(html_path)
    return written


def _write_pictures(doc, out_dir, fmt, options, written):
    """Draw each picture into ``out_dir``; returns the report page's pictures, {title: svg text}, where a title
    ending in "(DOT source)" holds DOT text and None stands for a picture that could not be drawn."""
    from ..rendering import DotNotFoundError, render
    from ..rendering.pictures import pictures_to_draw

    pictures = {}
    for picture in pictures_to_draw(doc):
        path = os.path.join(out_dir, f"{picture.stem}.{fmt}")
        try:
            render(doc, path, format=fmt, graphs=[picture.graph], **options)
        except DotNotFoundError as exc:
            written.dot_missing = True
            path = exc.dot_path
        except OSError as exc:
            raise OutputFolderError(f"cannot write `{path}`: {exc.strerror or exc}") from None
        written.paths.append(path)
        written.about[path] = picture.about
        if written.dot_missing:
            pictures[picture.title] = None
            pictures[picture.title + " (DOT source)"] = _read(path)
        else:
            pictures[picture.title] = _svg_of(doc, path, fmt, picture, options)
    return pictures


def _svg_of(doc, path, fmt, picture, options):
    """The SVG the report page embeds: the file just written, or a second layout when it was not an SVG."""
    if fmt == "svg":
        return _read(path)
    from ..rendering import render

    graph = render(doc, format="svg", graphs=[picture.graph], **options)
    return graph._repr_image_svg_xml()


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
