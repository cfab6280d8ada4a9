"""``gradviz run SCRIPT [ARGS]...`` (or ``gradviz run -m MODULE [ARGS]...``): run a script under a trace, print
the report, write pictures and files.

The options become a ``RunOptions``; ``pipeline.run`` is the run itself, or ``job.run_job`` with --nproc-per-node.
"""

import click

from .artifacts import FORMATS
from .engine import ENGINES
from .options import rankdir_option


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
    from . import pipeline
    from .output import Output

    output = Output(quiet=quiet or json_only)
    opts = pipeline.RunOptions(
        script=script, args=tuple(args), as_module=as_module, sarif_path=sarif_path, out_dir=out_dir, fmt=fmt,
        engine=engine, use_torch=use_torch, fail_on=fail_on, json_only=json_only, quiet=quiet, draw=not no_render,
        max_nodes=max_nodes, max_pictures=max_pictures, render_budget=render_budget, rankdir=rankdir,
        check_backward=not no_check_backward, exact_memory=exact_memory,
        schedule=pipeline.choose_schedule(output, light, full_steps, trace_steps))  # a job's ranks record the same
    if nproc_per_node is not None or timeout is not None:
        _run_job(output, opts, nproc_per_node, timeout)
    raise click.exceptions.Exit(pipeline.run(output, opts))


def _run_job(output, opts, nproc_per_node, timeout):
    """``--nproc-per-node N``: the script as a torchrun job (``gradviz torchrun --standalone``)."""
    if opts.use_torch or opts.engine == "gradviz":
        output.abort("--nproc-per-node runs a torchrun job, on PyTorch: drop --engine gradviz / --torch")
    if nproc_per_node is None:
        output.abort("--timeout applies to a job: give --nproc-per-node too (or use `gradviz torchrun`)")
    from .job import run_job

    run_job(output, ["--standalone", "--nproc-per-node", str(nproc_per_node)], opts, timeout)
