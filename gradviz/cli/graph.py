"""``gradviz graph SCRIPT|TRACE.json``: draw the autograd graph, without the report."""

import os
import subprocess
import sys

import click

from .artifacts import FORMATS
from .engine import ENGINES
from .options import rankdir_option
from .output import one_line


@click.command()
@click.argument("source", type=click.Path(dir_okay=True))
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.option("-o", "--output", "out_file", type=click.Path(dir_okay=False), default=None,
              help="Picture file; its suffix gives the format  [default: gradviz-out/<stem>/graph.<format>]")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
              help="Picture format when -o has no known suffix  [default: svg]")
@click.option("--iteration", type=click.IntRange(min=0), default=None, help="Draw the graph of iteration N.")
@click.option("--depth", type=click.IntRange(min=0), default=None,
              help="Collapse modules deeper than K into one box each.")
@click.option("--show-saved", is_flag=True, help="Draw saved tensors as side nodes (shape, bytes, version).")
@click.option("--show-grads", is_flag=True, help="Label edges with the gradient norm that flowed through them.")
@click.option("--forward", is_flag=True, help="Draw the forward data flow instead of the backward graph.")
@click.option("--architecture", is_flag=True,
              help="Draw the model's architecture: the forward view, each module one box with its input and output "
                   "shapes (with --depth K, modules deeper than K inside their parent's box).")
@rankdir_option("[default: BT for the backward graph, TB for --forward]")
@click.option("--open", "open_after", is_flag=True, help="Open the picture when it is written.")
@click.option("--engine", type=click.Choice(ENGINES), default="auto", show_default=True,
              help="Run the script on gradviz's engine, on real PyTorch, or auto (as for `run`).")
@click.option("--torch", "use_torch", is_flag=True, help="Same as --engine gradviz.")
@click.option("--max-nodes", type=click.IntRange(min=1), default=500, show_default=True,
              help="Collapse graphs larger than this by module depth.")
@click.option("--exact-memory", is_flag=True,
              help="On PyTorch (a script), measure saved memory through saved-tensor hooks (every pack seen; slower). "
                   "gradviz's engine measures it exactly either way.")
def graph(source, args, out_file, fmt, iteration, depth, show_saved, show_grads, forward, architecture, rankdir,
          open_after, engine, use_torch, max_nodes, exact_memory):
    """Draw the graph of SOURCE: a Python script (run under a trace) or a saved trace (.json).

    Options may come before or after SOURCE; arguments for the script go after `--`:
    `gradviz graph train.py -o graph.svg -- --epochs 1`.
    """
    from .output import Output

    output = Output()
    fmt = _format(out_file, fmt)
    doc, exit_code = _document(output, source, args, use_torch, engine, exact_memory)
    options = {"iteration": iteration, "depth": depth, "show_saved": show_saved, "show_grads": show_grads,
               "forward": forward, "max_nodes": max_nodes, "rankdir": rankdir, "architecture": architecture}
    path = _draw(output, doc, source, out_file, fmt, options)
    output.line(f"Wrote {path}")
    if open_after:
        open_path(path)
    raise click.exceptions.Exit(exit_code)


def _format(out_file, fmt):
    """``--format`` wins; else the suffix of ``-o``; else svg."""
    if fmt:
        return fmt
    suffix = os.path.splitext(out_file or "")[1].lstrip(".").lower()
    return suffix if suffix in FORMATS else "svg"


def _document(output, source, args, use_torch, engine="auto", exact_memory=False):
    """The trace document to draw, and the exit status (the script's own, when one was run)."""
    if source.endswith(".json"):
        if args:
            output.abort(f"a trace file takes no script arguments (got `{' '.join(args)}`)")
        return _load(output, source), 0
    from .pipeline import choose_engine, report_script_failure
    from .runner import ScriptError
    from .session import trace_script

    choice = choose_engine(output, engine, source, use_torch)
    try:
        traced = trace_script(source, args, torch=choice.shim, engine=choice.trace, exact_memory=exact_memory)
    except ScriptError as exc:
        output.abort(str(exc))
    report_script_failure(output, traced.result)
    return traced.doc, traced.result.exit_code


def _load(output, path):
    from ..document import load_trace, terminal_safe

    name = terminal_safe(path)  # the file's name is shown inert, whatever it holds
    if not os.path.exists(path):
        output.abort(f"no such trace file `{name}`")
    try:
        loaded = load_trace(path)
    except (OSError, ValueError) as exc:  # TraceFormatError (a ValueError) names the first bad field in one line
        message = terminal_safe(one_line(exc)).removeprefix(f"{name}: ")
        output.abort(f"invalid trace `{name}`: {message}")
    return loaded


def _draw(output, doc, source, out_file, fmt, options):
    from ..rendering import DOT_MISSING, DotNotFoundError
    from .artifacts import OutputFolderError, prepare_folder, reason_of, write_picture

    stem = os.path.splitext(os.path.basename(os.path.normpath(source)))[0]
    path = out_file or os.path.join("gradviz-out", stem, f"graph.{fmt}")
    try:
        prepare_folder(os.path.dirname(path) or ".")
        path = write_picture(doc, path, fmt, **options)  # atomic: a failure leaves the previous picture
    except DotNotFoundError as exc:
        output.note(DOT_MISSING)
        path = exc.dot_path
    except OutputFolderError as exc:
        output.abort(str(exc))
    except OSError as exc:
        output.abort(f"cannot write `{path}`: {reason_of(exc)}")
    except ValueError as exc:  # --iteration N with no graph in iteration N
        output.abort(one_line(exc))
    except RuntimeError as exc:  # dot failed, crashed, lacks the format, or ran past the time budget
        output.abort(f"cannot draw `{path}`: {one_line(exc)}")
    return path


def opener_command(path, platform=None):
    """The platform's "open this file" command."""
    platform = platform or sys.platform
    if platform == "darwin":
        return ["open", path]
    if platform.startswith("win"):
        return ["cmd", "/c", "start", "", path]
    return ["xdg-open", path]


def open_path(path):
    """Open ``path`` with the platform opener, without waiting for it."""
    subprocess.Popen(opener_command(path), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
