"""Run Graphviz's ``dot`` with a time budget: full settings, then cheaper settings, then a collapsed view.

``dot`` runs as a subprocess with a timeout, so a pathological graph costs at most the budget instead of a hang.
"""

import subprocess
import time

from . import dot_session, dot_text
from .cluster_order import each_in_declared_order
from .dot import to_dot
from .dot_program import dot_program
from .graph import build_graph
from .style import CHEAP_LAYOUT

DOT_MISSING = ("the Graphviz `dot` program is not installed, so only the .dot source was written; for pictures "
               "install it: `apt-get install graphviz` (Debian/Ubuntu), `brew install graphviz` (macOS) or "
               "`conda install graphviz`")
COLLAPSED_MAX_NODES = 150


class DotNotFoundError(RuntimeError):
    """``dot`` is missing: the DOT source was kept (``digraph``, and ``dot_path`` when a file was asked for)."""

    def __init__(self, message=DOT_MISSING, digraph=None, dot_path=None):
        super().__init__(message)
        self.digraph, self.dot_path = digraph, dot_path


class LayoutTimeout(RuntimeError):
    """``dot`` did not finish within the budget, even on the collapsed view."""


def dot_available():
    """Whether the Graphviz ``dot`` program is on PATH (pictures need it; ``.dot`` sources do not)."""
    return dot_program() is not None


def run_dot(source, fmt, timeout):
    """``dot -T<fmt>`` on ``source``; returns the output bytes. Raises ``LayoutTimeout`` after ``timeout`` s."""
    exe = dot_program()
    if exe is None:
        raise DotNotFoundError()
    env = dot_text.environment() if fmt == "svg" else None  # (a PNG's or PDF's layout keeps Pango's measures)
    laid = dot_text.widen_bold(source) if env is not None else source
    current = dot_session.active()
    if current is not None and fmt in ("svg", "dot"):  # a dot already started (``dot_session``)
        try:
            data = current.run(laid, max(timeout, 0.05), fmt)
        except dot_session.Timeout as exc:
            raise LayoutTimeout(f"dot took longer than {timeout:.1f} s") from exc
        if data is not None:
            return data
    try:  # (and when the session's dot exited on the graph: this run says why)
        done = subprocess.run([exe, f"-T{fmt}"], input=laid.encode("utf-8"), capture_output=True,
                              timeout=max(timeout, 0.05), check=False, env=env)
    except subprocess.TimeoutExpired as exc:
        raise LayoutTimeout(f"dot took longer than {timeout:.1f} s") from exc
    if done.returncode != 0 and env is not None and dot_text.failed(exe, done.stderr):
        return run_dot(source, fmt, timeout)  # (this Graphviz would not run with the cut plugin list)
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise RuntimeError(f"dot failed: {message[0] if message else f'exit status {done.returncode}'}")
    return each_in_declared_order(done.stdout, laid) if fmt == "svg" else done.stdout


def lay_out(doc, fmt="svg", budget=4.0, **options):
    """Build, write and lay out the picture within ``budget`` seconds: returns (spec, dot source, output bytes).
    ``base`` (an option): ``working_graph``'s result for these options, the caller's to give up (reshaped here).

    Steps: full settings (45% of the budget), cheaper settings (30%), then a collapsed view of at most
    150 nodes with cheap settings (what is left). The picture's subtitle says which step produced it.
    """
    deadline = time.perf_counter() + budget
    base = options.pop("base", None)  # (the fallback below walks the graph again with its own options)
    spec = build_graph(doc, base=base, base_kept=base is None, **options)
    source = to_dot(spec)
    try:
        return spec, source, run_dot(source, fmt, budget * 0.45)
    except LayoutTimeout:
        pass
    spec.layout.update(CHEAP_LAYOUT)
    spec.subtitle.append(f"cheaper layout settings: the full layout took over {budget * 0.45:.1f} s")
    source = to_dot(spec)
    try:
        return spec, source, run_dot(source, fmt, min(budget * 0.3, deadline - time.perf_counter()))
    except LayoutTimeout:
        pass
    options = dict(options, max_nodes=min(options.get("max_nodes", 500), COLLAPSED_MAX_NODES), ghost_uses=2,
                   fold_loops=True)
    spec = build_graph(doc, **options)
    spec.layout.update(CHEAP_LAYOUT)
    spec.subtitle.append(f"collapsed view: the full graph did not lay out within {budget:.1f} s")
    source = to_dot(spec)
    remaining = deadline - time.perf_counter()
    try:
        return spec, source, run_dot(source, fmt, max(remaining, budget * 0.1))
    except LayoutTimeout as exc:
        raise LayoutTimeout(f"the graph did not lay out within the {budget:.1f} s budget, even collapsed; "
                            "try --depth 0 or --max-nodes 100") from exc
