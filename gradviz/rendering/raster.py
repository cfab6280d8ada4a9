"""PNG and PDF pictures from a graph laid out once.

Laying a graph out is ``dot``'s slow part for SVG; for PNG it is the drawing of the pixels: a 130-node model laid
out in 0.2 s becomes a 3,700 × 7,500 image that takes seconds more. So a PNG or PDF is made in two steps, each with
its own time budget: ``dot -Tdot`` lays the picture out (``layout.lay_out``, with its cheaper fallbacks) and
writes the graph with every position; then ``dot -Kneato -n2`` draws that layout without laying it out again, a
PNG at a resolution that keeps it under ``MAX_PIXELS``. report.html's view of the same picture is drawn from that
layout too (``draw(laid, "svg")``), only when the page is built: it is never laid out a second time. Inside a
run's ``dot_session`` the drawing goes to a ``-Kneato -n2`` process started once for all pictures, which draws a
small picture's PNG and the page's SVG of it from one read of the layout.
"""

import math
import re
import subprocess

from . import dot_session
from .cluster_order import in_declared_order
from .dot_program import dot_program
from .layout import DotNotFoundError, lay_out
from .overview import MAX_OVERVIEW_NODES

MAX_PIXELS = 8_000_000  # a PNG's pixels at most (about 2,000 × 4,000); the resolution drops to stay under it
DPI = 96  # Graphviz's own resolution for PNG, kept when the picture is small enough
_BB = re.compile(r'\bbb="([-\d.e]+),([-\d.e]+),([-\d.e]+),([-\d.e]+)"')


class RasterTimeout(RuntimeError):
    """Drawing a laid-out graph took longer than its budget."""


def laid_out(doc, budget, into=None, **options):
    """The picture's DOT source with every node, edge and cluster position: ``dot -Tdot`` within ``budget``.
    ``into``: a dict that receives the picture's ``spec`` and DOT ``source`` (for the page to reuse)."""
    spec, source, data = lay_out(doc, "dot", budget, **options)
    if into is not None:
        into.update(spec=spec, source=source)
    return data.decode("utf-8")


def resolution(laid):
    """Dots per inch for a PNG of ``laid``: ``DPI``, or less when that would pass ``MAX_PIXELS``."""
    found = _BB.search(laid)
    if found is None:
        return DPI
    x0, y0, x1, y1 = map(float, found.groups())
    points = max(x1 - x0, 1.0) * max(y1 - y0, 1.0)  # 72 points an inch
    return min(DPI, max(1, int(72 * math.sqrt(MAX_PIXELS / points))))


def draw(laid, fmt, timeout, source=None):
    """``laid`` drawn as ``fmt`` (png, pdf, svg) without a new layout; raises ``RasterTimeout`` after
    ``timeout`` seconds. An SVG's clusters come in the order ``source`` (the DOT laid out) declares them, when
    given: the layout's own order is dot's memory's (``cluster_order``)."""
    exe = dot_program()
    if exe is None:
        raise DotNotFoundError()
    found = _drawn_in_session(laid, fmt, timeout)
    if found is not None:
        return in_declared_order(found, source) if fmt == "svg" and source else found
    command = [exe, f"-T{fmt}", "-Kneato", "-n2"]  # the format first, as for a plain ``dot -T<fmt>``
    if fmt == "png":
        command.append(f"-Gdpi={resolution(laid)}")
    try:
        done = subprocess.run(command, input=laid.encode("utf-8"), capture_output=True,
                              timeout=max(timeout, 0.05), check=False)
    except subprocess.TimeoutExpired as exc:
        raise RasterTimeout(f"drawing the laid-out graph as {fmt.upper()} took longer than {timeout:.1f} s") \
            from exc
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise RuntimeError(f"dot failed: {message[0] if message else f'exit status {done.returncode}'}")
    return in_declared_order(done.stdout, source) if fmt == "svg" and source else done.stdout


def _drawn_in_session(laid, fmt, timeout):
    """``laid`` drawn as ``fmt`` by the running ``dot_session``'s drawing process (started once for a run's
    pictures), or None without a session. A PNG at ``DPI`` or a PDF is drawn with its SVG beside it, when the page
    will draw that SVG too (a small picture, or one with no module to box: ``views._Drawer.top``): one process
    reads the layout once for both. (A lower resolution is a graph attribute, which would scale the SVG too.)"""
    current = dot_session.active()
    if current is None:
        return None
    kept = current.drawn.pop((fmt, laid), None)
    if kept is not None:
        return kept
    formats, text = [fmt], laid
    dpi = resolution(laid) if fmt == "png" else DPI
    if dpi != DPI:
        text = laid.replace("digraph {\n", f"digraph {{\n\tgraph [dpi={dpi}];\n", 1)
    elif fmt != "svg" and (laid.count("width=") <= MAX_OVERVIEW_NODES or "subgraph cluster" not in laid):
        formats.append("svg")
    try:
        parts = current.draw(text, formats, max(timeout, 0.05))
    except dot_session.Timeout as exc:
        raise RasterTimeout(f"drawing the laid-out graph as {fmt.upper()} took longer than {timeout:.1f} s") \
            from exc
    if parts is None:  # the process exited on it: a plain run says why
        return None
    if len(parts) > 1:
        current.drawn[("svg", laid)] = parts[1]
    return parts[0]
