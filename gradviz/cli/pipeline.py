"""One traced run, as a pipeline read top to bottom (``run``): compile the script → choose the engine → trace it
(the tracer builds the document and diagnoses it) → merge its children's documents → write the artifacts → print
the report → the exit status. ``gradviz run`` is this sequence; ``gradviz graph`` uses its first steps; a job of
ranks wraps it (``job.py``: each rank runs the same steps, the documents are merged). Every step is a public
function here, shared by the commands; only the commands parse options, into a ``RunOptions``.
"""

import os
from dataclasses import dataclass

from . import collector
from .artifacts import shown_path


@dataclass(frozen=True)
class Target:
    """The compiled script: ``path`` is the file that runs (a module's file with -m), ``module`` the
    ``runner.Module`` when it runs as ``python -m`` would (``__spec__``, relative imports), else None."""
    path: str
    code: object
    module: object = None


@dataclass(frozen=True)
class Sarif:
    """Where ``--sarif`` writes, and the folder its paths are relative to: both resolved before the script runs
    (where the run started: a repository's root, in CI)."""
    path: str
    base: str


@dataclass(frozen=True)
class RunOptions:
    """What one run was asked to do, from the command line. ``script`` is what runs: a script's path, or with
    ``as_module`` a module's name (``-m``)."""
    script: str
    args: tuple = ()
    as_module: bool = False  # ``script`` is a module name, run as ``python -m`` runs it
    out_dir: str = None  # None: gradviz-out/<script-stem>/ (gradviz-out/<module name>/ with -m)
    sarif_path: str = None  # --sarif FILE: the diagnostics as SARIF 2.1.0 there too
    fmt: str = "svg"
    engine: str = "auto"
    use_torch: bool = False
    fail_on: str = "error"
    json_only: bool = False
    quiet: bool = False
    draw: bool = True
    max_nodes: int = 500
    max_pictures: int = 12
    render_budget: float = 60.0
    rankdir: str = None
    check_backward: bool = True
    exact_memory: bool = False
    schedule: dict = None  # gradviz.trace's light / full_steps / trace_steps (``choose_schedule``)


def run(output, opts):
    """``gradviz run`` on one process: returns the exit status."""
    target = compile_target(output, opts)
    # before the script runs: it may change or even delete the working folder
    out_dir, sarif = resolve_out_dir(opts), resolve_sarif(opts)
    choice = choose_engine(output, opts.engine, target.path, opts.use_torch)
    written = None
    try:
        with collector.frozen() as heap:  # (full collections walk only what the run makes: collector.py)
            traced = trace_run(output, opts, target, choice, out_dir)
            heap.settle()
            sarif_error = write_sarif(traced.doc, sarif)
            if opts.json_only:
                if sarif_error:
                    output.error(sarif_error)
                return print_json(output, traced, opts.fail_on) or int(bool(sarif_error))
            # the files first: whatever happens to the terminal afterwards (a closed pipe, Ctrl-C), they are on disk
            from .artifacts import Written

            written = Written()
            folder_error = write_artifacts(traced.doc, out_dir, opts, written)
            status = print_run(output, traced, written, folder_error, out_dir, opts.fail_on, sarif, sarif_error)
    except KeyboardInterrupt:
        output.error(interrupted(written, out_dir, opts.json_only))
        return 130
    return 1 if (folder_error or sarif_error) and status == 0 else status


# ----- the steps ---------------------------------------------------------------------------------------------------
def compile_target(output, opts):
    """The script (or with ``as_module`` the module, found as ``python -m`` finds it) compiled, as a ``Target``;
    a one-line error when it cannot run (a mistyped option, say), before any note about the engine."""
    from .runner import ScriptError, compile_module, compile_script

    try:
        if opts.as_module:
            module = compile_module(opts.script)
            return Target(module.path, module.code, module)
        return Target(opts.script, compile_script(opts.script))
    except ScriptError as exc:
        output.abort(str(exc))


def choose_engine(output, engine, script, use_torch):
    """The engine for this run (``cli/engine.py``); a one-line error when it cannot run, a note when auto falls
    back to gradviz's engine."""
    from .engine import choose

    try:
        choice = choose(engine, script, use_torch)
    except ValueError as exc:
        output.abort(str(exc))
    if choice.note:
        output.note(choice.note)
    return choice


def choose_schedule(output, light, full_steps, trace_steps):
    """``gradviz.trace``'s schedule arguments from the options; a one-line error for a bad ``--trace-steps``."""
    if trace_steps is None:
        return {"light": light, "full_steps": full_steps}
    from ..tracing.schedule import parse_steps

    if not light:
        output.abort("--trace-steps and --full cannot be used together: --full records every iteration already")
    try:
        return {"light": True, "full_steps": full_steps, "trace_steps": parse_steps(trace_steps)}
    except ValueError as exc:
        output.abort(f"--trace-steps: {exc}")


def default_out_dir(script, as_module=False):
    if as_module:  # `-m pkg.train`: gradviz-out/pkg.train, the name as given
        return os.path.join("gradviz-out", script)
    stem = os.path.splitext(os.path.basename(os.path.normpath(script)))[0]
    return os.path.join("gradviz-out", stem)


def resolve_out_dir(opts):
    return os.path.abspath(opts.out_dir or default_out_dir(opts.script, opts.as_module))


def resolve_sarif(opts):
    """``--sarif FILE`` as a ``Sarif`` (None without it), resolved against the working folder of now."""
    return Sarif(os.path.abspath(opts.sarif_path), os.getcwd()) if opts.sarif_path else None


def trace_run(output, opts, target, choice, out_dir):
    """Run the compiled script (``compile_target``'s ``Target``) under a trace; returns its ``TracedRun`` with the
    document to write (the script's, merged with its children's documents when it started processes)."""
    from .children import Children
    from .output import script_stdout_to_stderr, tolerate_unencodable
    from .runner import ScriptError
    from .session import trace_script

    children = Children(None if opts.json_only else out_dir, choice.trace, opts.check_backward, opts.exact_memory,
                        target.path, opts.schedule)
    settings = {"torch": choice.shim, "check_backward": opts.check_backward, "engine": choice.trace,
                "exact_memory": opts.exact_memory, "schedule": opts.schedule, "started": children.started,
                "unseen": choice.unseen, "code": target.code, "module": target.module}
    try:
        if opts.json_only:
            # stdout carries the JSON document alone: the script's prints, and its children's, go to stderr
            with script_stdout_to_stderr():
                traced = trace_script(target.path, opts.args, **settings)
        else:
            traced = trace_script(target.path, opts.args, output=output,
                                  progress=output.is_terminal and not opts.quiet, **settings)
    except ScriptError as exc:
        output.abort(str(exc))
    finally:
        children.close()
    traced.doc = children.report(traced.doc)
    tolerate_unencodable()
    return traced


def write_artifacts(doc, out_dir, opts, written):
    """report.json, report.html and the pictures, noted in ``written`` (``artifacts.Written``) as they are; returns
    the output folder's one-line error, or None."""
    from .artifacts import OutputFolderError, write_all

    try:
        write_all(doc, out_dir, fmt=opts.fmt, draw=opts.draw,
                  render_options={"max_nodes": opts.max_nodes, "rankdir": opts.rankdir},
                  written=written, max_pictures=opts.max_pictures, total_budget=opts.render_budget)
    except OutputFolderError as exc:
        return str(exc)
    return None


def write_sarif(doc, sarif):
    """``--sarif FILE``: the diagnostics as SARIF 2.1.0; the one-line reason when the file cannot be written
    (nothing to do, and None, without ``--sarif``)."""
    if sarif is None:
        return None
    from ..rendering.sarif import write_sarif as write
    from ..viz import sarif_catalogue
    from .artifacts import reason_of

    try:
        write(doc, sarif.path, sarif.base, sarif_catalogue())
    except (OSError, ValueError) as exc:
        return f"cannot write `{shown_path(sarif.path)}`: {reason_of(exc)}"
    return None


def print_sarif(output, sarif, sarif_error):
    """The line saying where the SARIF file went, or why it could not be written."""
    if sarif_error:
        output.error(sarif_error)
    elif sarif is not None:
        output.line(f"Wrote SARIF to {shown_path(sarif.path)}")


def print_json(output, traced, fail_on):
    """``--json-only``: the document on stdout, nothing else; returns the exit status."""
    import sys

    from .output import broken_pipe_safe

    with broken_pipe_safe():
        report_script_failure(output, traced.result)
        write_indented_json(sys.stdout, traced.doc)
        sys.stdout.flush()
    return exit_code(output, traced.doc, traced.result, fail_on, announce=False)


def write_indented_json(stream, doc, batch=1 << 16):
    """``json.dumps(doc, indent=1)`` and a newline into ``stream``, a batch of about ``batch`` characters at a
    time. With an indent, ``json.dumps`` runs the Python encoder and keeps every one of its small pieces (a
    number, a comma, a key) until it joins them: several times the text's size, a long run's peak."""
    import json

    pieces, size = [], 0
    for piece in json.JSONEncoder(indent=1).iterencode(doc):
        pieces.append(piece)
        size += len(piece)
        if size >= batch:
            stream.write("".join(pieces))
            pieces, size = [], 0
    pieces.append("\n")
    stream.write("".join(pieces))


def print_run(output, traced, written, folder_error, out_dir, fail_on, sarif=None, sarif_error=None):
    """The terminal report of a run, then the files it wrote (the SARIF file too); returns the exit status."""
    from .output import broken_pipe_safe

    doc, result = traced.doc, traced.result
    with broken_pipe_safe():
        report_script_failure(output, result)
        if result.cwd_note:
            from ..document import terminal_safe

            output.note(terminal_safe(result.cwd_note))
        print_job(output, doc)
        print_report(output, doc)
        if folder_error:
            skipped_notes(output, written)
            output.error(folder_error)
        else:
            list_files(output, written, out_dir)
        print_sarif(output, sarif, sarif_error)
        return exit_code(output, doc, result, fail_on, announce=True)


# ----- what the steps print ---------------------------------------------------------------------------------------
def interrupted(written, out_dir, json_only):
    """The one line for Ctrl-C after the script: which report the folder holds now."""
    if json_only or written is None:
        return "interrupted (Ctrl-C) before the report was written"
    shown = shown_path(out_dir)
    if written.reports_written:
        return f"interrupted (Ctrl-C): this run's report.json and report.html are in `{shown}`; some pictures " \
               "may be missing"
    return f"interrupted (Ctrl-C) while writing the report: `{shown}` keeps the previous report, if there was one"


def report_script_failure(output, result):
    """The script's own exception: its traceback trimmed to the user's lines, or one line for a PyTorch name
    or device gradviz lacks."""
    from ..errors import GradvizError
    from .runner import location_of

    if result.exit_message:
        output.stderr_text(result.exit_message + "\n")
    exc = result.exception
    if exc is None:
        return
    if isinstance(exc, GradvizError) and getattr(exc, "torch_name", None):  # what gradviz lacks, named
        where = location_of(exc)
        output.error(f"{where}: {exc}" if where else str(exc))
    else:
        output.stderr_text(result.traceback)


def print_job(output, doc):
    """A job's per-process lines (the ranks, or the processes the script started), before the usual report (which
    is the main document's: rank 0's under torchrun); nothing for a document of one process."""
    if not doc.get("job"):
        return
    from ..rendering.ranks import job_lines, job_table, verdict_lines

    for line in verdict_lines(doc):  # the root cause first, above the table of every process
        output.line(line)
    table, lines = job_table(doc), job_lines(doc)
    if table is not None:
        output.print(table)
    for line in lines:
        output.line(line)
    if table is not None or lines:
        output.line("")


def print_report(output, doc):
    """The verdict first, then the diagnostics, then the summary (``rendering/report.terminal_report``)."""
    from ..rendering import report

    for renderable in report.terminal_report(doc):
        if renderable is not None:
            output.print(renderable)
            output.line("")


_LISTED_FILES = 14  # file lines the report lists at most; report.json's manifest has them all
_NOTES = 5  # notes on pictures skipped for one reason, at most; then one line for the rest


def list_files(output, written, out_dir):
    """File names under the folder named once on the first line, each picture with what it shows (at most
    ``_LISTED_FILES`` lines); then the pictures not drawn, skipped or written as SVG, a few lines at most, and
    how to get pictures when ``dot`` is missing."""
    from ..rendering import DOT_MISSING

    shown = shown_path(out_dir).rstrip(os.sep)
    output.line(f"Wrote {len(written.paths)} files to {shown}{os.sep}")
    names = [os.path.relpath(path, out_dir) for path in written.paths]
    width = max(len(name) for name in names)
    listed = list(zip(written.paths, names))
    if len(listed) > _LISTED_FILES:  # the pictures are cut, report.json and report.html always shown
        listed = listed[:_LISTED_FILES - 3] + [(None, None)] + listed[-2:]
    for path, name in listed:
        if path is None:
            output.line(f"  … +{len(names) - _LISTED_FILES + 1} more pictures, see report.html")
            continue
        about = written.about.get(path)
        output.line(f"  {name.ljust(width)}  {about}" if about else f"  {name}")
    if written.not_drawn:
        count = len(written.not_drawn)
        output.line(f"  +{count} more {'picture' if count == 1 else 'pictures'} not drawn "
                    f"(--max-pictures {written.max_pictures}), listed in report.json's manifest")
    skipped_notes(output, written)
    if written.dot_missing:
        output.note(DOT_MISSING)


def skipped_notes(output, written):
    """One line per picture that could not be drawn (or shown, or was written as SVG), with the reason; pictures
    skipped for the same reason (the run's budget spent) past the first few are one line."""
    from ..document import terminal_safe

    # a reason may quote dot's stderr, which quotes the user's labels: printed inert
    by_reason = {}
    for item in written.skipped:
        by_reason.setdefault(item["reason"], []).append(item)
    for reason, items in by_reason.items():
        for item in items[:_NOTES]:
            output.note(terminal_safe(f"skipped picture {item['file']} ({item['picture']}): {reason}"))
        if len(items) > _NOTES:
            output.note(terminal_safe(f"skipped {len(items) - _NOTES} more pictures: {reason}"))
    for item in written.as_svg:
        output.note(terminal_safe(f"picture {item['file']} ({item['picture']}): {item['reason']} "
                                  f"({item['written']})"))


def exit_code(output, doc, result, fail_on, announce):
    """The script's own status first (its exception, ``sys.exit(n)``), then ``--fail-on``."""
    if result.exit_code:
        return result.exit_code
    if fail_on == "never":
        return 0
    from ..document.vocabulary import severity_rank  # here: `gradviz run --help` need not load the document package

    threshold = severity_rank(fail_on)
    failing = [d for d in doc.get("diagnostics", []) if severity_rank(d.get("severity")) >= threshold]
    if not failing:
        return 0
    if announce:
        noun = "diagnostic" if len(failing) == 1 else "diagnostics"
        output.note(f"{len(failing)} {noun} at or above `{fail_on}` (--fail-on {fail_on}): exit status 1")
    return 1
