"""gradviz's IPython extension: ``%load_ext gradviz``, then a ``%%gradviz`` cell runs traced.

The cell's output shows the verdict (how many diagnostics, of which severity, or that nothing was found), each
diagnostic at its line of the cell, and the interactive graph: report.html's own viewer (search, module boxes
that open, the node inspector), inline and self-contained in a sandboxed frame. The trace stays in the
notebook's namespace as ``_gradviz_trace``.

``%%gradviz --engine torch --full --out DIR``: the engine traced (``auto`` by default: gradviz's engine, and
PyTorch once imported), every iteration recorded in full (``--light`` is the default, as for ``gradviz run``),
and report.json/report.html also written to DIR.
"""

import argparse
import html
import shlex
import threading

_FRAME_HEIGHT = 620  # pixels: the viewer's toolbar, a graph and the inspector beside it
# The threads running when the extension loaded: the kernel's own (IOPub, Heartbeat, Control...). A cell's trace
# cannot observe them, rightly, but they never run the user's tensors: listing them as unseen in every cell's
# report would be noise. Threads the notebook's own cells start are still listed. (Kernel threads that start
# later, on demand, are known to every trace by the package of their class: tracing/thread_facts.py.)
_KERNEL_THREADS = set()


def load_ipython_extension(ipython):
    me = threading.current_thread()
    _KERNEL_THREADS.update(t.ident for t in threading.enumerate() if t is not me)
    ipython.register_magic_function(_cell_magic(ipython), magic_kind="cell", magic_name="gradviz")


def unload_ipython_extension(ipython):
    ipython.magics_manager.magics["cell"].pop("gradviz", None)


class _MagicUsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # a usage mistake is one line in the cell's output, not a SystemExit
        raise _MagicUsageError(f"%%gradviz: {message}")


def _parser():
    parser = _Parser(prog="%%gradviz", add_help=False)
    parser.add_argument("--engine", choices=("auto", "gradviz", "torch"), default="auto")
    parser.add_argument("--full", dest="light", action="store_false", default=True)
    parser.add_argument("--light", dest="light", action="store_true")
    parser.add_argument("--out", default=None)
    return parser


def _cell_magic(ipython):
    def gradviz(line, cell):
        """Run the cell under gradviz.trace() and show the verdict, the diagnostics and the graph."""
        try:
            options = _parser().parse_args(shlex.split(line))
        except _MagicUsageError as exc:
            print(exc)
            return None
        return run_cell_traced(ipython, cell, options, line)

    return gradviz


def run_cell_traced(ipython, cell, options, line=""):
    import gradviz

    # the cell's own %magics and !commands as IPython would run them; the `%%gradviz` line first (as a comment),
    # so that every line number (reports, tracebacks) is the one the notebook shows
    source = f"# %%gradviz {line}".rstrip() + "\n" + ipython.transform_cell(cell)
    filename = ipython.compile.cache(source, ipython.execution_count)  # its lines reach tracebacks and reports
    code = ipython.compile(source, filename, "exec")
    try:
        tr = gradviz.trace(engine=options.engine, light=options.light)
    except ImportError as exc:  # --engine torch without a usable torch: one line, the cell not run
        print(f"%%gradviz: {str(exc).splitlines()[0]}")
        return None
    failed = None
    tr.start()
    try:
        exec(code, ipython.user_ns)
    except Exception as exc:  # shown after the report, as IPython shows it; the trace records where
        failed = exc
        tr.__exit__(type(exc), exc, exc.__traceback__)
    finally:
        tr.stop()  # no-op after __exit__; a KeyboardInterrupt still stops the trace on its way out
    ipython.user_ns["_gradviz_trace"] = tr
    doc = without_kernel_threads(tr.to_dict())
    written = _write(doc, options.out) if options.out else None
    from IPython.display import display

    display({"text/html": cell_html(doc, filename, written), "text/plain": cell_text(doc, filename, written)},
            raw=True)
    if failed is not None:
        # from the cell's frame on, as IPython shows a cell's exception (this module's exec frame is not the user's)
        tb = failed.__traceback__
        ipython.showtraceback((type(failed), failed, tb.tb_next if tb.tb_next is not None else tb))
    return None


def without_kernel_threads(doc, kernel_threads=None):
    """``doc`` without the kernel's own threads among those the trace could not observe (``threads.unobserved``
    and the ``unseen`` entry of kind ``thread``, recounted)."""
    kernel_threads = _KERNEL_THREADS if kernel_threads is None else kernel_threads
    threads = doc.get("threads") or {}
    unobserved = threads.get("unobserved") or []
    kept = [t for t in unobserved if t.get("ident") not in kernel_threads]
    if len(kept) == len(unobserved):
        return doc
    threads["unobserved"] = kept
    entries = []
    for entry in doc.get("unseen") or []:
        if entry.get("kind") != "thread":
            entries.append(entry)
        elif kept:
            names = ", ".join(t["name"] for t in kept[:5]) + (" …" if len(kept) > 5 else "")
            entries.append(dict(entry, what=f"threads running beside the trace ({names})", count=len(kept)))
    doc["unseen"] = entries
    if not kept:
        threads.pop("note", None)
    return doc


def verdict(doc):
    """One line, the terminal report's first (``rendering/verdict.py``), but for a cell that ran no autograd work
    at all, where the likely reason is the cell's own."""
    from .document.coverage import saw_autograd
    from .rendering.verdict import verdict_text

    if not saw_autograd(doc):
        return "gradviz saw no graph in this cell (nothing requiring grad ran, or another engine did)"
    return verdict_text(doc)


def _where(loc, filename):
    if not loc or not loc.get("line"):
        return ""
    if loc.get("file") == filename:
        return f"cell line {loc['line']}"
    return f"{loc.get('file')}:{loc['line']}"


def cell_text(doc, filename, written=None):
    lines = [verdict(doc)]
    for d in doc.get("diagnostics", []):
        where = _where(d.get("location"), filename)
        lines.append(f"  {d['code']} ({d.get('severity')}){' at ' + where if where else ''}: "
                     f"{str(d.get('message', '')).splitlines()[0]}")
    if written:
        lines.append(written)
    return "\n".join(lines)


def cell_html(doc, filename, written=None):
    """The verdict, the diagnostics and report.html's viewer in a sandboxed frame (its scripts run; it reaches
    nothing outside the frame)."""
    from .rendering.html import html_report

    items = []
    for d in doc.get("diagnostics", []):
        where = _where(d.get("location"), filename)
        items.append(f'<li><b class="gv-{html.escape(str(d.get("severity")))}">{html.escape(str(d.get("severity")))}'
                     f"</b> <code>{html.escape(d['code'])}</code>"
                     f"{' at ' + html.escape(where) if where else ''}: {html.escape(str(d.get('message', '')))}"
                     + (f"<br><small>{html.escape(str(d['hint']))}</small>" if d.get("hint") else "") + "</li>")
    page = html_report(doc)
    frame = (f'<iframe class="gradviz-viewer" sandbox="allow-scripts" style="width:100%;height:{_FRAME_HEIGHT}px;'
             f'border:1px solid #ccc" srcdoc="{html.escape(page, quote=True)}"></iframe>')
    note = f"<p><small>{html.escape(written)}</small></p>" if written else ""
    return (f'<div class="gradviz-cell"><p><b>{html.escape(verdict(doc))}</b></p>'
            + (f"<ul>{''.join(items)}</ul>" if items else "") + frame + note + "</div>")


def _write(doc, out_dir):
    from .cli.artifacts import OutputFolderError, write_all

    try:
        write_all(doc, out_dir, draw=False)
    except OutputFolderError as exc:
        return f"gradviz: {exc}"
    return f"report.json and report.html written to {out_dir}"
