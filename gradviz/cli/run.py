"""``gradviz run SCRIPT [ARGS]...`` (or ``gradviz run -m MODULE [ARGS]...``): run a script under a trace, print
the report, write pictures and files."""

import os

import click

from .artifacts import FORMATS, shown_path
from .engine import ENGINES
from .graph import rankdir_option


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.argument("script", type=click.Path(dir_okay=True))
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.option("-m", "--module", "as_module", is_flag=True,
              help="SCRIPT is a module name, run as `python -m SCRIPT` runs it (the working folder first on "
                   "sys.path, relative imports working).")
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
@click.option("--sarif", "sarif_path", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Also write the diagnostics as SARIF 2.1.0 to FILE (code scanning, editors' SARIF viewers).")
@click.option("--quiet", "-q", is_flag=True, help="Print nothing but errors; still write the files.")
@click.option("--no-render", is_flag=True, help="Skip the pictures (report.json and report.html are still written).")
@click.option("--max-nodes", type=click.IntRange(min=1), default=500, show_default=True,
              help="Collapse graphs larger than this by module depth.")
@click.option("--max-pictures", type=click.IntRange(min=0), default=12, show_default=True,
              help="Draw at most this many pictures: the first graph, the diagnosed ones, then the largest; the "
                   "others are listed in report.json's manifest.")
@click.option("--render-budget", type=click.FloatRange(min=0), default=60.0, show_default=True, metavar="SECONDS",
              help="Seconds for drawing all the pictures; those not drawn by then are listed.")
@rankdir_option("[default: BT, the root at the bottom]")
@click.option("--no-check-backward", is_flag=True,
              help="Don't check custom autograd Functions' backward numerically (the wrong-backward diagnosis).")
@click.option("--exact-memory", is_flag=True,
              help="On PyTorch, measure saved memory through saved-tensor hooks (every pack seen; slower). "
                   "gradviz's engine measures it exactly either way.")
@click.option("--light/--full", "light", default=True, show_default=True,
              help="--light: record every op only on the first iterations, sampled ones (8, 16, 32…), new graph "
                   "shapes and after a finding; watch the others cheaply (NaN/Inf loss, graphs alive, gradient "
                   "norms). --full: record every op of every iteration (slow on long runs).")
@click.option("--full-steps", type=click.IntRange(min=0), default=3, show_default=True, metavar="N",
              help="With --light: how many first iterations are recorded in full.")
@click.option("--trace-steps", default=None, metavar="A:B",
              help="Record exactly iterations A to B (inclusive) in full, the others light: the rerun a light "
                   "finding advises.")
@click.option("--nproc-per-node", type=click.IntRange(min=1), default=None,
              help="Run SCRIPT as a job of this many ranks with torchrun --standalone, every rank traced "
                   "(see `gradviz torchrun` for torchrun's other options).")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=None,
              help="With --nproc-per-node: stop the job after this many seconds (each rank still writes its "
                   "document and the line it was on).")
def run(script, args, as_module, out_dir, fmt, engine, use_torch, fail_on, json_only, sarif_path, quiet, no_render,
        max_nodes, rankdir, max_pictures, render_budget, no_check_backward, exact_memory, light, full_steps,
        trace_steps, nproc_per_node, timeout):
    """Run SCRIPT under a trace: report the graphs, the mistakes at their lines, and the memory.

    Everything after SCRIPT is passed to the script as its own arguments. With -m, SCRIPT is a module
    (`gradviz run -m mypkg.train --lr 0.1`).
    """
    from .output import Output, broken_pipe_safe, script_stdout_to_stderr, tolerate_unencodable
    from .runner import ScriptError, compile_module, compile_script
    from .session import trace_script

    output = Output(quiet=quiet or json_only)
    schedule = choose_schedule(output, light, full_steps, trace_steps)  # the job's ranks record the same iterations
    if nproc_per_node is not None or timeout is not None:
        if use_torch or engine == "gradviz":
            output.abort("--nproc-per-node runs a torchrun job, on PyTorch: drop --engine gradviz / --torch")
        _run_job(output, script, args, nproc_per_node, timeout, out_dir, fmt, fail_on, no_render, max_nodes,
                 no_check_backward, exact_memory, json_only, schedule, as_module, sarif_path)
    show_progress = output.is_terminal and not (quiet or json_only)
    module = None
    try:  # a SCRIPT that cannot run (a mistyped option, say) is its one line, before any note about the engine
        if as_module:
            module = compile_module(script)
            code = module.code
        else:
            code = compile_script(script)
    except ScriptError as exc:
        output.abort(str(exc))
    # resolved before the script runs: it may change or even delete the working folder
    out_dir = os.path.abspath(out_dir or default_out_dir(script, as_module))
    sarif_path = os.path.abspath(sarif_path) if sarif_path else None
    sarif_base = os.getcwd()  # SARIF's paths are relative to where the run started (a repository's root, in CI)
    if module is not None:
        script = module.path  # what runs, and what the report and the engine choice read
    choice = choose_engine(output, engine, script, use_torch)
    written = sarif_error = None
    from ..distributed.launch import ChildTracing

    children = ChildTracing(None if json_only else out_dir, choice.trace, not no_check_backward, exact_memory, script,
                            schedule)
    try:
        try:
            if json_only:
                # stdout carries the JSON document alone: the script's prints, and its children's, go to stderr
                with script_stdout_to_stderr():
                    traced = trace_script(script, args, torch=choice.shim, check_backward=not no_check_backward,
                                          engine=choice.trace, exact_memory=exact_memory, schedule=schedule,
                                          started=children.started, unseen=choice.unseen, code=code,
                                          module=module)
            else:
                traced = trace_script(script, args, torch=choice.shim, output=output, progress=show_progress,
                                      check_backward=not no_check_backward, engine=choice.trace,
                                      exact_memory=exact_memory, schedule=schedule,
                                      started=children.started, unseen=choice.unseen, code=code,
                                      module=module)
        except ScriptError as exc:
            output.abort(str(exc))
        finally:
            children.close()
        doc, result = children.report(traced.doc), traced.result
        tolerate_unencodable()

        sarif_error = _write_sarif(doc, sarif_path, sarif_base) if sarif_path else None
        if json_only:
            import json

            if sarif_error:
                output.error(sarif_error)
            with broken_pipe_safe():
                _report_script_failure(output, result)
                output.raw(json.dumps(doc, indent=1))
            status = _exit_code(output, doc, result, fail_on, announce=False)
            raise click.exceptions.Exit(status or int(bool(sarif_error)))

        # the files first: whatever happens to the terminal afterwards (a closed pipe, Ctrl-C), they are on disk
        from .artifacts import OutputFolderError, Written, write_all

        written, folder_error = Written(), None
        try:
            write_all(doc, out_dir, fmt=fmt, draw=not no_render,
                      render_options={"max_nodes": max_nodes, "rankdir": rankdir},
                      written=written, max_pictures=max_pictures, total_budget=render_budget)
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
            if sarif_path and not sarif_error:
                output.line(f"Wrote SARIF to {shown_path(sarif_path)}")
            elif sarif_error:
                output.error(sarif_error)
            code = _exit_code(output, doc, result, fail_on, announce=True)
    except KeyboardInterrupt:
        output.error(_interrupted(written, out_dir, json_only))
        raise click.exceptions.Exit(130) from None
    if (folder_error or sarif_error) and code == 0:
        code = 1
    raise click.exceptions.Exit(code)


def _write_sarif(doc, path, base):
    """``--sarif FILE``: the diagnostics as SARIF 2.1.0; the one-line reason when the file cannot be written."""
    from ..rendering.sarif import write_sarif
    from .artifacts import reason_of

    try:
        write_sarif(doc, path, base)
    except (OSError, ValueError) as exc:
        return f"cannot write `{shown_path(path)}`: {reason_of(exc)}"
    return None


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


def _run_job(output, script, args, nproc_per_node, timeout, out_dir, fmt, fail_on, no_render, max_nodes,
             no_check_backward, exact_memory, json_only, schedule, as_module=False, sarif_path=None):
    """``--nproc-per-node N``: the script as a torchrun job (``gradviz torchrun --standalone``)."""
    if nproc_per_node is None:
        output.abort("--timeout applies to a job: give --nproc-per-node too (or use `gradviz torchrun`)")
    from .torchrun import run_job

    run_job(output, ["--standalone", "--nproc-per-node", str(nproc_per_node)], script, list(args), out_dir=out_dir,
            fmt=fmt, timeout=timeout, fail_on=fail_on, draw=not no_render, max_nodes=max_nodes,
            check_backward=not no_check_backward, exact_memory=exact_memory, json_only=json_only,
            schedule=schedule, as_module=as_module, sarif_path=sarif_path)


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

    unseen = report.unseen_block(doc)  # first: what the trace did not see qualifies everything below it
    for renderable in (unseen, report.summary(doc), report.diagnostics_table(doc), report.memory_table(doc)):
        if renderable is not None:
            output.print(renderable)
            output.line("")


_LISTED_FILES = 14  # file lines the report lists at most; report.json's manifest has them all
_NOTES = 5  # notes on pictures skipped for one reason, at most; then one line for the rest


def _list_files(output, written, out_dir):
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
    _skipped_notes(output, written)
    if written.dot_missing:
        output.note(DOT_MISSING)


def _skipped_notes(output, written):
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


def default_out_dir(script, as_module=False):
    if as_module:  # `-m pkg.train`: gradviz-out/pkg.train, the name as given
        return os.path.join("gradviz-out", script)
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
