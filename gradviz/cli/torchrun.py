"""``gradviz torchrun [GRADVIZ OPTIONS] [TORCHRUN OPTIONS] SCRIPT [ARGS]...`` (``-m MODULE`` as torchrun takes it):
a torchrun job with every rank traced, reported as one (docs/distributed.md). ``gradviz run --nproc-per-node N``
comes here too."""

import os

import click

from .artifacts import FORMATS, shown_path


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.argument("args", nargs=-1, type=click.UNPROCESSED, required=True)
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Folder for the report and each rank's document  [default: gradviz-out/<script-stem>/]")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="svg", show_default=True,
              help="Picture format.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Stop the job after this many seconds (each rank still writes its document and where it was).")
@click.option("--fail-on", type=click.Choice(["error", "warning", "never"]), default="error", show_default=True,
              help="Exit 1 if any diagnostic is at or above this severity.")
@click.option("--quiet", "-q", is_flag=True, help="Print nothing but errors; still write the files.")
@click.option("--sarif", "sarif_path", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Also write the job's diagnostics as SARIF 2.1.0 to FILE.")
@click.option("--no-render", is_flag=True, help="Skip the pictures (report.json and report.html are still written).")
@click.option("--max-nodes", type=click.IntRange(min=1), default=500, show_default=True,
              help="Collapse graphs larger than this by module depth.")
@click.option("--no-check-backward", is_flag=True,
              help="Don't check custom autograd Functions' backward numerically (the wrong-backward diagnosis).")
@click.option("--exact-memory", is_flag=True, help="Measure saved memory through saved-tensor hooks (slower).")
@click.option("--light/--full", "light", default=True, show_default=True,
              help="As for `gradviz run`: each rank records every op only on its first, sampled and new-shape "
                   "iterations (--light) or on every iteration (--full).")
@click.option("--full-steps", type=click.IntRange(min=0), default=3, show_default=True, metavar="N",
              help="With --light: how many first iterations each rank records in full.")
@click.option("--trace-steps", default=None, metavar="A:B",
              help="Each rank records exactly iterations A to B (inclusive) in full, the others light.")
def torchrun(args, out_dir, fmt, timeout, fail_on, quiet, sarif_path, no_render, max_nodes, no_check_backward,
             exact_memory, light, full_steps, trace_steps):
    """Run a script with PyTorch's torchrun, every rank traced; one report for the job.

    gradviz's options come first, then torchrun's own (passed through: --nproc-per-node, --standalone, -m, ...),
    then SCRIPT (or, after -m, a module) and its arguments.
    """
    from .output import Output

    output = Output(quiet=quiet)
    from ..distributed.launch import LaunchError, split_torchrun_args
    from .run import choose_schedule

    schedule = choose_schedule(output, light, full_steps, trace_steps)

    try:
        torchrun_args, script, script_args, as_module = split_torchrun_args(list(args))
    except LaunchError as exc:
        output.abort(str(exc))
    run_job(output, torchrun_args, script, script_args, out_dir=out_dir, fmt=fmt, timeout=timeout,
            fail_on=fail_on, draw=not no_render, max_nodes=max_nodes, check_backward=not no_check_backward,
            exact_memory=exact_memory, schedule=schedule, as_module=as_module, sarif_path=sarif_path)


def run_job(output, torchrun_args, script, script_args, out_dir=None, fmt="svg", timeout=None, fail_on="error",
            draw=True, max_nodes=500, check_backward=True, exact_memory=False, json_only=False, schedule=None,
            as_module=False, sarif_path=None):
    """Launch, merge the ranks' documents, write the files, print the report; exits with the job's status.
    ``as_module``: ``script`` is a module name, each rank runs it as ``python -m`` would."""
    from ..distributed.launch import job_config, torchrun_command
    from ..distributed.launch import run_job as launch
    from ..distributed.merge import load_documents, merge
    from .run import _list_files, _print_report, _write_sarif, default_out_dir

    if as_module:  # found here first, so a misspelt name is one line rather than every rank's error
        from .runner import ScriptError, compile_module

        try:
            path = compile_module(script).path
        except ScriptError as exc:
            output.abort(str(exc))
    elif not os.path.isfile(script):
        output.abort(f"no such script `{script}`")
    else:
        path = script
    out_dir = os.path.abspath(out_dir or default_out_dir(script, as_module))
    sarif_base = os.getcwd()
    config = job_config(out_dir, "torch", check_backward, exact_memory, path, schedule)
    try:
        code, timed_out = launch(torchrun_command(torchrun_args, script, script_args, as_module), config, timeout)
    except KeyboardInterrupt:
        code, timed_out = 130, False
    processes, notes = load_documents(config)
    doc = merge(None, processes, how="torchrun")
    if doc is None:
        output.abort(f"torchrun exited with status {code} and no rank wrote a document (see its messages above)")
    doc["job"]["exit_code"], doc["job"]["timed_out"], doc["job"]["timeout"] = code, timed_out, timeout
    for note in notes:
        doc.setdefault("internal_errors", []).append({"where": "processes", "type": "UnreadableDocument",
                                                      "message": note})
    sarif_error = _write_sarif(doc, os.path.abspath(sarif_path), sarif_base) if sarif_path else None
    if sarif_error:
        output.error(sarif_error)
    if json_only:
        import json

        output.raw(json.dumps(doc, indent=1))
        raise click.exceptions.Exit(_job_exit(code, timed_out, doc, fail_on) or int(bool(sarif_error)))
    from .artifacts import OutputFolderError, Written, write_all

    written = Written()
    try:
        write_all(doc, out_dir, fmt=fmt, draw=draw, render_options={"max_nodes": max_nodes}, written=written)
    except OutputFolderError as exc:
        output.abort(str(exc))
    print_job(output, doc)
    _print_report(output, doc)
    _list_files(output, written, out_dir)
    if sarif_path and not sarif_error:
        output.line(f"Wrote SARIF to {shown_path(sarif_path)}")
    if timed_out:
        output.note(f"the job was stopped after --timeout {timeout:g} s")
    raise click.exceptions.Exit(_job_exit(code, timed_out, doc, fail_on) or int(bool(sarif_error)))


def print_job(output, doc):
    """The per-rank lines, before the usual report (which is the main document's: rank 0's under torchrun)."""
    from ..rendering.ranks import job_lines, job_table

    table, lines = job_table(doc), job_lines(doc)
    if table is not None:
        output.print(table)
    for line in lines:
        output.line(line)
    if table is not None or lines:
        output.line("")


def _job_exit(code, timed_out, doc, fail_on):
    if code or timed_out:
        return code or 1
    if fail_on == "never":
        return 0
    from ..document.vocabulary import severity_rank

    threshold = severity_rank(fail_on)
    return int(any(severity_rank(d.get("severity")) >= threshold for d in doc.get("diagnostics", [])))
