"""A job of ranks, wrapped around the pipeline: launch the ranks (each runs the pipeline's trace under
``distributed.rank_worker``), merge their documents into one, then the pipeline's last steps (write the
artifacts, print, the exit status). ``gradviz torchrun`` and ``gradviz run --nproc-per-node N`` come here; only
they load ``gradviz.distributed``."""

import os

import click

from . import pipeline


def run_job(output, torchrun_args, opts, timeout=None):
    """Launch, merge the ranks' documents, write the files, print the report; exits with the job's status.
    With ``opts.as_module`` each rank runs the module as ``python -m`` would."""
    from ..distributed.launch import job_config, torchrun_command
    from ..distributed.launch import run_job as launch
    from ..distributed.merge import load_documents, merge

    if opts.as_module:  # found here first, so a misspelt name is one line rather than every rank's error
        from .runner import ScriptError, compile_module

        try:
            path = compile_module(opts.script).path
        except ScriptError as exc:
            output.abort(str(exc))
    elif not os.path.isfile(opts.script):
        output.abort(f"no such script `{opts.script}`")
    else:
        path = opts.script
    out_dir, sarif = pipeline.resolve_out_dir(opts), pipeline.resolve_sarif(opts)
    config = job_config(out_dir, "torch", opts.check_backward, opts.exact_memory, path, opts.schedule)
    command = torchrun_command(torchrun_args, opts.script, list(opts.args), opts.as_module)
    try:
        code, timed_out = launch(command, config, timeout)
    except KeyboardInterrupt:
        code, timed_out = 130, False
    processes, notes = load_documents(config)
    doc = merge(None, processes, how="torchrun", timed_out=timed_out)
    if doc is None:
        output.abort(f"torchrun exited with status {code} and no rank wrote a document (see its messages above)")
    doc["job"]["exit_code"], doc["job"]["timed_out"], doc["job"]["timeout"] = code, timed_out, timeout
    for note in notes:
        doc.setdefault("internal_errors", []).append({"where": "processes", "type": "UnreadableDocument",
                                                      "message": note})
    sarif_error = pipeline.write_sarif(doc, sarif)
    if sarif_error:
        output.error(sarif_error)
    if opts.json_only:
        import json

        output.raw(json.dumps(doc, indent=1))
        raise click.exceptions.Exit(job_exit(code, timed_out, doc, opts.fail_on) or int(bool(sarif_error)))
    from .artifacts import Written

    written = Written()
    folder_error = pipeline.write_artifacts(doc, out_dir, opts, written)
    if folder_error:
        output.abort(folder_error)
    pipeline.print_job(output, doc)
    pipeline.print_report(output, doc)
    pipeline.list_files(output, written, out_dir)
    if not sarif_error:  # an error was said above, before the report
        pipeline.print_sarif(output, sarif, None)
    if timed_out:
        output.note(f"the job was stopped after --timeout {timeout:g} s")
    status = job_exit(code, timed_out, doc, opts.fail_on)
    if status and not (code or timed_out):  # torchrun itself exited 0: say why this is not 0
        output.note(f"exit status {status}: a diagnostic at or above --fail-on {opts.fail_on} (torchrun itself "
                    "exited 0; --fail-on never gives torchrun's own status)")
    raise click.exceptions.Exit(status or int(bool(sarif_error)))


def job_exit(code, timed_out, doc, fail_on):
    """The job's exit status (docs/distributed.md "Exit status"): the launcher's own when it failed (a rank
    raised, was killed) or the job timed out (then 1 if the launcher said 0); else, as for ``gradviz run``,
    ``--fail-on`` over the job's diagnostics: 1 when one is at or above it, where plain torchrun exits 0."""
    if code or timed_out:
        return code or 1
    if fail_on == "never":
        return 0
    from ..document.vocabulary import severity_rank

    threshold = severity_rank(fail_on)
    return int(any(severity_rank(d.get("severity")) >= threshold for d in doc.get("diagnostics", [])))
