"""``gradviz run SCRIPT [ARGS]...``: run a script under a trace, print the report, write pictures and files."""

import os

import click

from .artifacts import FORMATS, shown_path
from .engine import ENGINES


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.argument("script", type=click.Path(dir_okay=True))
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Folder for pictures, report.json and report.html  [default: gradviz-out/<script-stem>/]")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="svg", show_default=True,
              help="Picture format.")
@click.option("--engine", type=click.Choice(ENGINES), default="auto", show_default=True,
              help="Run on gradviz's engine, on real PyTorch, or auto: PyTorch when the script imports it and it "
                   "is installed.")
@click.option("--torch", "use_torch", is_flag=True,
              help="Same as --engine gradviz: `import torch` resolves to gradviz for this run.")
@click.option("--fail-on", type=click.Choice(["error", "warning", "never"]), default="error", show_default=True,
              help="Exit 1 if any diagnostic is at or above this severity.")
@click.option("--json-only", is_flag=True, help="Print the trace document as JSON to stdout and nothing else.")
@click.option("--quiet", "-q", is_flag=True, help="Print nothing but errors; still write the files.")
@click.option("--no-render", is_flag=True, help="Skip the pictures (report.json and report.html are still written).")
@click.option("--max-nodes", type=click.IntRange(min=1), default=500, show_default=True,
              help="Collapse graphs larger than this by module depth.")
@click.option("--no-check-backward", is_flag=True,
              help="Don't check custom autograd Functions' backward numerically (the wrong-backward diagnosis).")
@click.option("--exact-memory", is_flag=True,
              help="On PyTorch, measure saved memory through saved-tensor hooks (every pack seen; slower). "
                   "gradviz's engine measures it exactly either way.")
@click.option("--nproc-per-node", type=click.IntRange(min=1), default=None,
              help="Run SCRIPT as a job of this many ranks with torchrun --standalone, every rank traced "
                   "(see `gradviz torchrun` for torchrun's other options).")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=None,
              help="With --nproc-per-node: stop the job after this many seconds (each rank still writes its "
                   "document and the line it was on).")
def run(script, args, out_dir, fmt, engine, use_torch, fail_on, json_only, quiet, no_render, max_nodes,
        no_check_backward, exact_memory, nproc_per_node, timeout):
    """Run SCRIPT under a trace: report the graphs, the mistakes at their lines, and the memory.

    Everything after SCRIPT is passed to the script as its own arguments.
    """
    from .output import Output, broken_pipe_safe, script_stdout_to_stderr, tolerate_unencodable
    from .runner import ScriptError
    from .session import trace_script

    output = Output(quiet=quiet or json_only)
    if nproc_per_node is not None or timeout is not None:
        if use_torch or engine == "gradviz":
            output.abort("--nproc-per-node runs a torchrun job, on PyTorch: drop --engine gradviz / --torch")
        _run_job(output, script, args, nproc_per_node, timeout, out_dir, fmt, fail_on, no_render, max_nodes,
                 no_check_backward, exact_memory, json_only)
    show_progress = output.is_terminal and not (quiet or json_only)
    choice = choose_engine(output, engine, script, use_torch)
    # resolved before the script runs: it may change or even delete the working folder
    out_dir = os.path.abspath(out_dir or default_out_dir(script))
    written = None
    from ..distributed.launch import ChildTracing

    children = ChildTracing(None if json_only else out_dir, choice.trace, not no_check_backward, exact_memory, script)
    try:
        try:
            if json_only:
                # stdout carries the JSON document alone: the script's prints, and its children's, go to stderr
                with script_stdout_to_stderr():
                    traced = trace_script(script, args, torch=choice.shim, check_backward=not no_check_backward,
                                          engine=choice.trace, exact_memory=exact_memory, started=children.started)
            else:
                traced = trace_script(script, args, torch=choice.shim, output=output, progress=show_progress,
                                      check_backward=not no_check_backward, engine=choice.trace,
                                      exact_memory=exact_memory, started=children.started)
        except ScriptError as exc:
            output.abort(str(exc))
        finally:
            children.close()
        doc, result = children.report(traced.doc), traced.result
        tolerate_unencodable()

        if json_only:
            import json

            with broken_pipe_safe():
                _report_script_failure(output, result)
                output.raw(json.dumps(doc, indent=1))
            raise click.exceptions.Exit(_exit_code(output, doc, result, fail_on, announce=False))

        # the files first: whatever happens to the terminal afterwards (a closed pipe, Ctrl-C), they are on disk
        from .artifacts import OutputFolderError, Written, write_all

        written, folder_error = Written(), None
        try:
            write_all(doc, out_dir, fmt=fmt, draw=not no_render, render_options={"max_nodes": max_nodes},
                      written=written)
        except OutputFolderError as exc:
            folder_error = str(exc)
        with broken_pipe_safe():
            _report_script_failure(output, result)
            if result.cwd_note:
                from ..document import terminal_safe

                output.note(terminal_safe(result.cwd_note))
            _print_job(output, doc)
            _print_report(output, doc)
            if folder_error:
                _skipped_notes(output, written)
                output.error(folder_error)
            else:
                _list_files(output, written, out_dir)
            code = _exit_code(output, doc, result, fail_on, announce=True)
    except KeyboardInterrupt:
        output.error(_interrupted(written, out_dir, json_only))
        raise click.exceptions.Exit(130) from None
    if folder_error and code == 0:
        code = 1
    raise click.exceptions.Exit(code)


def _run_job(output, script, args, nproc_per_node, timeout, out_dir, fmt, fail_on, no_render, max_nodes,
             no_check_backward, exact_memory, json_only):
    """``--nproc-per-node N``: the script as a torchrun job (``gradviz torchrun --standalone``)."""
    if nproc_per_node is None:
        output.abort("--timeout applies to a job: give --nproc-per-node too (or use `gradviz torchrun`)")
    from .torchrun import run_job

    run_job(output, ["--standalone", "--nproc-per-node", str(nproc_per_node)], script, list(args), out_dir=out_dir,
            fmt=fmt, timeout=timeout, fail_on=fail_on, draw=not no_render, max_nodes=max_nodes,
            check_backward=not no_check_backward, exact_memory=exact_memory, json_only=json_only)


def _print_job(output, doc):
    if doc.get("job"):
        from .torchrun import print_job

        print_job(output, doc)


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


def _interrupted(written, out_dir, json_only):
    """The one line for Ctrl-C after the script: which report the folder holds now."""
    if json_only or written is None:
        return "interrupted (Ctrl-C) before the report was written"
    shown = shown_path(out_dir)
    if written.reports_written:
        return f"interrupted (Ctrl-C): this run's report.json and report.html are in `{shown}`; some pictures " \
               "may be missing"
    return f"interrupted (Ctrl-C) while writing the report: `{shown}` keeps the previous report, if there was one"


def _report_script_failure(output, result):
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


def _print_report(output, doc):
    from ..rendering import report

    for renderable in (report.summary(doc), report.diagnostics_table(doc), report.memory_table(doc)):
        output.print(renderable)
        output.line("")


def _list_files(output, written, out_dir):
    """File names under the folder named once on the first line, each picture with what it shows; then one
    note per picture that could not be drawn, and how to get pictures when ``dot`` is missing."""
    from ..rendering import DOT_MISSING

    shown = shown_path(out_dir).rstrip(os.sep)
    output.line(f"Wrote {len(written.paths)} files to {shown}{os.sep}")
    names = [os.path.relpath(path, out_dir) for path in written.paths]
    width = max(len(name) for name in names)
    for path, name in zip(written.paths, names):
        about = written.about.get(path)
        output.line(f"  {name.ljust(width)}  {about}" if about else f"  {name}")
    _skipped_notes(output, written)
    if written.dot_missing:
        output.note(DOT_MISSING)


def _skipped_notes(output, written):
    """One line per picture that could not be drawn (or shown), with the reason."""
    from ..document import terminal_safe

    # a reason may quote dot's stderr, which quotes the user's labels: printed inert
    for item in written.skipped:
        output.note(terminal_safe(f"skipped picture {item['file']} ({item['picture']}): {item['reason']}"))
    for item in written.not_shown:
        output.note(terminal_safe(f"picture {item['file']} ({item['picture']}) {item['reason']}"))


def default_out_dir(script):
    stem = os.path.splitext(os.path.basename(os.path.normpath(script)))[0]
    return os.path.join("gradviz-out", stem)


def _exit_code(output, doc, result, fail_on, announce):
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
