"""Write what ``gradviz run`` leaves behind: report.json, report.html, one picture per distinct graph structure.

The order is what makes a run safe to interrupt or to fail around:

1. report.json and report.html are staged (written to temporary files in the folder, fsynced) and only then
   renamed over the old ones, so the folder always holds a complete report, this run's or the previous one;
2. gradviz's own files of an earlier run that this run does not write are removed (never anything else);
3. the pictures are drawn, each written atomically; one that fails (a format this Graphviz lacks, the time
   budget, a crash of ``dot``, a full disk) is skipped with its reason, and the others still land;
4. report.html (and report.json, when a picture was skipped) are written again with the pictures and the list
   of skipped ones.

Whatever the run's length, drawing is bounded: at most ``max_pictures`` pictures (``rendering.pictures``
chooses the first graph, the diagnosed ones, the largest; the others are listed in the manifest as not drawn),
within a total time budget for the whole run (``total_budget``), each picture within its own (``budget``). A
PNG or PDF is laid out once and drawn from that layout with a budget of its own (``rendering/raster.py``); when
the drawing runs past it, the picture is written as SVG instead, and the manifest says so.

report.json carries a ``manifest``: the files of this run, the pictures skipped and those not drawn, with why.
When Graphviz's ``dot`` program is missing, the ``.dot`` sources are written instead of pictures and the caller
says in one line how to get them.
"""

import os
import re
import time
from dataclasses import dataclass, field

from .output import one_line

TOTAL_BUDGET = 60.0  # seconds for all the pictures of a run (``--render-budget``)
_LEAST = 0.5  # seconds left under which no further picture is started

FORMATS = ("svg", "png", "pdf", "dot")
REPORT_FILES = ("report.json", "report.html")
# The names gradviz gives its own files. Only files named so (regular files, not links) are ever removed from an
# output folder: pictures of an earlier run, and temporary files a killed run left behind.
_OWN_FILE = re.compile(r"structure-\d+-iter\d+(-graph\d+)?\.(svg|png|pdf|dot)"
                       r"|\.(report\.json|report\.html|structure-\d+-iter\d+(-graph\d+)?\.(svg|png|pdf|dot))"
                       r"\.[A-Za-z0-9_]+\.gradviz-tmp")


class OutputFolderError(Exception):
    """The output folder cannot be created or written (one-line message)."""


@dataclass
class Written:
    paths: list = field(default_factory=list)
    dot_missing: bool = False
    about: dict = field(default_factory=dict)  # path -> what it shows ("structure 0, iteration 0 (first of 30)")
    skipped: list = field(default_factory=list)  # [{"file", "picture", "reason"}]: pictures not drawn
    not_drawn: list = field(default_factory=list)  # [{"picture", "structure", "graph", "reason"}]: over the cap
    as_svg: list = field(default_factory=list)  # [{"file", "written", "picture", "reason"}]: SVG, not PNG/PDF
    max_pictures: int = 0  # the cap this run drew under
    removed: list = field(default_factory=list)  # names of an earlier run's files removed from the folder
    reports_written: bool = False  # this run's report.json and report.html are in place


def prepare_folder(out_dir):
    """Create ``out_dir`` (and parents) and check it is writable."""
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as exc:
        raise OutputFolderError(f"cannot create output folder `{shown_path(out_dir)}`: {exc.strerror or exc}") \
            from None
    if not os.path.isdir(out_dir) or not os.access(out_dir, os.W_OK | os.X_OK):
        raise OutputFolderError(f"output folder `{shown_path(out_dir)}` is not writable")


def write_all(doc, out_dir, fmt="svg", draw=True, render_options=None, budget=4.0, written=None,
              max_pictures=None, total_budget=TOTAL_BUDGET):
    """Write report.json, report.html and (unless ``draw`` is false) the pictures into ``out_dir``; returns
    ``Written``. Adds the ``manifest`` to ``doc``. Pass ``written`` to follow the progress from outside (it is
    filled in as the files land, so an interrupted caller knows which report is on disk). ``max_pictures``
    (default ``rendering.pictures.MAX_PICTURES``) caps the pictures drawn, ``total_budget`` the seconds spent
    drawing them all, ``budget`` the seconds of one picture's layout (and of a PNG's or PDF's drawing).

    Raises ``OutputFolderError`` (one line) when the folder or a report file cannot be written; the previous
    report is then left as it was.
    """
    from ..rendering import dot_available
    from ..rendering.pictures import MAX_PICTURES, choose_pictures

    written = written if written is not None else Written()
    prepare_folder(out_dir)
    limit = written.max_pictures = MAX_PICTURES if max_pictures is None else max_pictures
    planned, listed = choose_pictures(doc, limit) if draw else ([], [])
    written.dot_missing = bool(planned) and fmt != "dot" and not dot_available()
    suffix = "dot" if written.dot_missing else fmt
    names = {picture.stem: f"{picture.stem}.{suffix}" for picture in planned}
    written.not_drawn = [{"picture": p.about, "structure": p.structure, "graph": p.graph,
                          "reason": f"not drawn: {limit} pictures at most (--max-pictures)"} for p in listed]
    manifest = {"files": [*REPORT_FILES, *names.values()], "skipped_pictures": written.skipped}
    if written.not_drawn:  # these two only when not empty: a short run's manifest is as it always was
        manifest["pictures_not_drawn"] = written.not_drawn
    doc["manifest"] = manifest
    page_parts = {}  # what both writes of the page share (``html_parts``'s ``reuse``): the document is the same
    _write_reports(doc, out_dir, {}, written, pending=bool(planned), reuse=page_parts)
    written.reports_written = True
    written.removed = remove_earlier_files(out_dir, set(manifest["files"]))

    from ..rendering.dot_session import session

    with session():  # the pictures and the page's views: laid out by dot processes started once for all
        _draw_all(doc, out_dir, fmt, written, planned, names, manifest, render_options, budget, total_budget,
                  page_parts)
    written.paths += [os.path.join(out_dir, name) for name in REPORT_FILES]
    return written


def _draw_all(doc, out_dir, fmt, written, planned, names, manifest, render_options, budget, total_budget,
              page_parts=None):
    """Draw the ``planned`` pictures within the budgets, then write the reports again with the page's views."""
    from ..document.index import DocIndex

    laid = {}  # graph id -> its picture's layout and unfolded working graph, which the page reuses (views.py)
    index = DocIndex(doc) if planned else None  # one for every picture: the records are the same, graphs differ
    deadline = _now() + total_budget
    for number, picture in enumerate(planned):
        name = names[picture.stem]
        left = deadline - _now()
        if left < _LEAST:  # the run's budget is spent: the rest are listed with why
            for later in planned[number:]:
                later_name = names[later.stem]
                written.skipped.append({"file": later_name, "picture": later.about, "reason":
                                        f"not drawn: the {total_budget:g} s budget for all pictures was spent "
                                        "(--render-budget)"})
                manifest["files"].remove(later_name)
            break
        path = os.path.join(out_dir, name)
        try:
            path = _draw(doc, path, picture, fmt, written, dict(render_options or {}, index=index),
                         min(budget, left), laid)
        except Exception as exc:  # this picture only: the report and the other pictures still land
            written.skipped.append({"file": name, "picture": picture.about, "reason": reason_of(exc)})
            manifest["files"].remove(name)
            continue
        if os.path.basename(path) != name:  # drawn as SVG instead
            manifest["files"][manifest["files"].index(name)] = os.path.basename(path)
        written.paths.append(path)
        written.about[path] = picture.about
    if written.as_svg:
        manifest["pictures_as_svg"] = written.as_svg
    if planned:  # the page's views of the graphs: the pictures' layouts, and module boxes that open inside
        _write_reports(doc, out_dir, None, written, pending=False, with_json=bool(written.skipped or written.as_svg),
                       view_options={"budget": budget, "laid": laid, **(render_options or {})}, reuse=page_parts)


def _now():
    return time.monotonic()


def _write_reports(doc, out_dir, pictures, written, pending, with_json=True, view_options=None, reuse=None):
    """Stage report.json and report.html, then rename both into place: on any failure neither is replaced.
    ``pictures`` None: the page draws its views itself, with ``view_options``. ``reuse``: see ``html_parts``."""
    from ..atomic import Staged
    from ..document.model import write_json_to

    page = _page(doc, pictures, written, pending, view_options, reuse)
    staged = []
    path = os.path.join(out_dir, "report.json")
    try:
        if with_json:
            staged.append(Staged(path, "w", encoding="utf-8"))
            write_json_to(staged[-1].file, doc)
            staged[-1].sync()
        path = os.path.join(out_dir, "report.html")
        staged.append(Staged(path, "wb"))
        file = staged[-1].file
        page.reverse()
        while page:  # a piece at a time, each let go once written: the page is never whole in memory
            # names from a non-UTF-8 file system arrive as lone surrogates: shown as \udcxx rather than failing
            file.write(page.pop().encode("utf-8", "backslashreplace"))
        for item in staged:
            item.sync()
        for item in staged:
            item.commit()
    except (OSError, ValueError) as exc:
        for item in staged:
            item.discard()
        kept = ("this run's report, written before the pictures, stays" if written.reports_written
                else "the previous report there is unchanged")
        raise OutputFolderError(f"cannot write `{shown_path(path)}`: {reason_of(exc)}; {kept}") from None
    except BaseException:  # Ctrl-C: no temporary file may stay, even one whose Staged was never returned
        from ..atomic import remove_temporaries

        for item in staged:
            item.discard()
        for name in REPORT_FILES:
            remove_temporaries(os.path.join(out_dir, name))
        raise


def _page(doc, pictures, written, pending, view_options=None, reuse=None):
    """report.html's text, a list of pieces to write in order (``rendering.html.html_parts``). Should building it
    fail (a bug of gradviz's, never the run's fault), the page says so in one line and the failure is recorded in
    ``internal_errors``: report.json is still written."""
    from ..rendering.html import html_parts

    try:
        return html_parts(doc, pictures, skipped=written.skipped, pending=pending, view_options=view_options,
                          reuse=reuse)
    except Exception as exc:
        import html

        reason = f"{type(exc).__name__}: {reason_of(exc)}"
        record = {"where": "report.html", "type": type(exc).__name__, "message": reason_of(exc)}
        if record not in doc.setdefault("internal_errors", []):  # the page is built twice when pictures are drawn
            doc["internal_errors"].append(record)
        return ['<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>gradviz report</title></head>'
                f"<body><p>gradviz could not build this page ({html.escape(reason)}); report.json beside it has "
                "the whole trace.</p></body></html>\n"]


def _draw(doc, path, picture, fmt, written, options, budget, laid):
    """Draw one picture to ``path`` (atomically); returns the path written: ``path``, or the same name ending in
    .svg when a PNG or PDF ran past its drawing budget. The layout goes into ``laid`` for the page."""
    from ..atomic import write_bytes, write_text
    from ..rendering import build_graph, to_dot
    from ..rendering.graph import folded, working_graph
    from ..rendering.layout import lay_out

    options = dict(options, graphs=[picture.graph])
    if fmt == "dot" or written.dot_missing:
        write_text(path, to_dot(build_graph(doc, **options)))
        return path
    if fmt in ("png", "pdf"):
        return _draw_raster(doc, path, picture, fmt, written, options, budget, laid)
    # walked once, unfolded: the picture folds a copy, the page's overview of it folds its own way
    unfolded = working_graph(doc, options.get("iteration"), options["graphs"],
                             options.get("forward") or options.get("architecture", False), False,
                             options.get("index"))
    spec, source, data = lay_out(doc, fmt, budget, base=folded(unfolded, options.get("fold_loops", True)),
                                 **options)
    write_bytes(path, data)
    laid[picture.graph] = (spec, source, data.decode("utf-8"), "svg", unfolded)
    return path


def _draw_raster(doc, path, picture, fmt, written, options, budget, laid):
    """A PNG or PDF: laid out once (``budget``), drawn from that layout (``budget`` again, measured on the
    drawing alone); past it, the SVG drawn from the same layout is written instead, with a note."""
    from ..atomic import write_bytes
    from ..rendering import raster

    about = {}
    text = raster.laid_out(doc, budget, into=about, **options)
    if about:
        laid[picture.graph] = (about["spec"], about["source"], text, "dot", None)
    try:
        data = raster.draw(text, fmt, budget)
    except raster.RasterTimeout as exc:
        fallback = os.path.splitext(path)[0] + ".svg"
        # (with the DOT laid out: its clusters then come in the DOT's order, as in every other SVG of a run)
        write_bytes(fallback, raster.draw(text, "svg", budget, about.get("source")))
        written.as_svg.append({"file": os.path.basename(path), "written": os.path.basename(fallback),
                               "picture": picture.about, "reason": f"{reason_of(exc)}; written as SVG instead"})
        return fallback
    write_bytes(path, data)
    return path


def write_picture(doc, path, fmt, budget=4.0, **options):
    """Draw ``doc``'s graph into ``path`` as ``render(doc, path)`` would (suffix added when missing), but
    atomically and never through a link; returns the path written. Without ``dot``, the ``.dot`` source is
    written beside it and ``DotNotFoundError`` (with ``dot_path``) says so."""
    from .. import rendering
    from ..atomic import write_bytes, write_text
    from ..rendering import DOT_MISSING, DotNotFoundError, build_graph, lay_out, to_dot

    target = path if os.path.splitext(path)[1] else f"{path}.{fmt}"
    if fmt == "dot" or not rendering.dot_available():
        source = to_dot(build_graph(doc, **options))
        dot_path = target if fmt == "dot" else os.path.splitext(path)[0] + ".dot"
        write_text(dot_path, source)
        if fmt != "dot":
            raise DotNotFoundError(DOT_MISSING, dot_path=dot_path)
        return dot_path
    if fmt in ("png", "pdf"):  # laid out once, drawn from that layout, each step within ``budget``
        from ..rendering import raster

        write_bytes(target, raster.draw(raster.laid_out(doc, budget, **options), fmt, budget))
        return target
    _, _, data = lay_out(doc, fmt, budget, **options)
    write_bytes(target, data)
    return target


def remove_earlier_files(out_dir, keep):
    """Remove gradviz's own files (pictures, leftover temporary files) that this run does not write, so the
    folder shows one run. A user's file, a link or a folder is never touched, whatever its name."""
    removed = []
    try:
        entries = list(os.scandir(out_dir))
    except OSError:
        return removed
    for entry in entries:
        if entry.name in keep or not _OWN_FILE.fullmatch(entry.name):
            continue
        try:
            if entry.is_file(follow_symlinks=False):
                os.unlink(entry.path)
                removed.append(entry.name)
        except OSError:
            pass
    return sorted(removed)


def shown_path(path):
    """``path`` as the terminal shows it: relative to the working folder when under it."""
    from ..rendering.report import display_path

    try:
        return display_path(path)
    except OSError:  # the script removed the working folder
        return path


def reason_of(exc):
    """Why something failed, in one line: the OS's words for an OS error, the message otherwise."""
    if isinstance(exc, OSError) and exc.strerror:
        text = exc.strerror
    else:
        from .runner import safe_str

        text = safe_str(exc) or type(exc).__name__
    text = one_line(text)
    return text if len(text) <= 300 else text[:297] + "..."
