"""``gradviz torchrun [GRADVIZ OPTIONS] [TORCHRUN OPTIONS] SCRIPT [ARGS]...`` (``-m MODULE`` as torchrun takes
it): a torchrun job with every rank traced, reported as one (docs/distributed.md); the job itself is
``job.run_job``, which ``gradviz run --nproc-per-node N`` uses too."""

import click

from .artifacts import FORMATS


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
    from .job import run_job
    from .pipeline import RunOptions, choose_schedule

    schedule = choose_schedule(output, light, full_steps, trace_steps)

    try:
        torchrun_args, script, script_args, as_module = split_torchrun_args(list(args))
    except LaunchError as exc:
        output.abort(str(exc))
    opts = RunOptions(script=script, args=tuple(script_args), as_module=as_module, sarif_path=sarif_path,
                      out_dir=out_dir, fmt=fmt, fail_on=fail_on, quiet=quiet,
                      draw=not no_render, max_nodes=max_nodes, check_backward=not no_check_backward,
                      exact_memory=exact_memory, schedule=schedule)
    run_job(output, torchrun_args, opts, timeout)
