"""A job of ranks, wrapped around the pipeline: launch the ranks (each runs the pipeline's trace under
``distributed.rank_worker``), merge their documents into one, then the pipeline's last steps (write the
artifacts, print, the exit status). ``gradviz torchrun`` and ``gradviz run --nproc-per-node N`` come here; only
they load ``gradviz.distributed``."""

import os

import click

from .pipeline import list_files, print_job, print_report, resolve_out_dir, write_artifacts


def run_job(output, torchrun_args, opts, timeout=None):
    """Launch, merge the ranks' documents, write the files, print the report; exits with the job's status."""
    from ..distributed.launch import job_config, torchrun_command
    from ..distributed.launch import run_job as launch
    from ..distributed.merge import load_documents, merge

    if not os.path.isfile(opts.script):
        output.abort(f"no such script `{opts.script}`")
    out_dir = resolve_out_dir(opts)
    config = job_config(out_dir, "torch", opts.check_backward, opts.exact_memory, opts.script, opts.schedule)
    try:
        code, timed_out = launch(torchrun_command(torchrun_args, opts.script, list(opts.args)), config, timeout)
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
    if opts.json_only:
        import json

        output.raw(json.dumps(doc, indent=1))
        raise click.exceptions.Exit(job_exit(code, timed_out, doc, opts.fail_on))
    from .artifacts import Written

    written = Written()
    folder_error = write_artifacts(doc, out_dir, opts, written)
    if folder_error:
        output.abort(folder_error)
    print_job(output, doc)
    print_report(output, doc)
    list_files(output, written, out_dir)
    if timed_out:
        output.note(f"the job was stopped after --timeout {timeout:g} s")
    raise click.exceptions.Exit(job_exit(code, timed_out, doc, opts.fail_on))


def job_exit(code, timed_out, doc, fail_on):
    """The launcher's status when it failed or timed out, else ``--fail-on`` over the job's diagnostics."""
    if code or timed_out:
        return code or 1
    if fail_on == "never":
        return 0
    from ..document.vocabulary import severity_rank

    threshold = severity_rank(fail_on)
    return int(any(severity_rank(d.get("severity")) >= threshold for d in doc.get("diagnostics", [])))
