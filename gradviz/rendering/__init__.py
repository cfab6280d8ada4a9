"""Pictures and reports from trace documents (docs/trace-format.md) — never from live engine objects.

``render`` draws a graph with Graphviz; ``build_graph``/``to_dot`` give the picture as data and as DOT text;
``report`` builds rich renderables; ``html`` writes the self-contained report page. Graphviz and rich load
only when used.
"""

import os

from .dot import to_dot
from .graph import build_graph
from .layout import DOT_MISSING, DotNotFoundError, LayoutTimeout, dot_available, lay_out

FORMATS = ("svg", "png", "pdf", "dot")

__all__ = ["render", "build_graph", "to_dot", "dot_available", "notebook_html", "as_document", "FORMATS",
           "DotNotFoundError", "LayoutTimeout", "DOT_MISSING"]


def as_document(obj):
    """A trace document from a document dict, a Trace (``to_dict``), a JSON path, or a Variable (snapshot)."""
    if isinstance(obj, dict):
        if obj.get("format") != "gradviz-trace":
            raise ValueError("not a gradviz trace document: its \"format\" field is "
                             f"{obj.get('format')!r}, expected 'gradviz-trace'")
        return obj
    if hasattr(obj, "to_dict") and callable(obj.to_dict):
        return obj.to_dict()
    if isinstance(obj, (str, os.PathLike)):
        import gradviz

        return gradviz.load_trace(obj)
    from ..autograd import Variable

    if isinstance(obj, Variable):
        try:
            from ..tracing import snapshot
        except ImportError as exc:
            raise RuntimeError("render(variable) needs the tracer's snapshot (gradviz.tracing.snapshot), "
                               "which is not available; trace the code with gradviz.trace() instead") from exc
        return snapshot(obj)
    raise TypeError(f"render() takes a Variable, a trace, a trace document or a JSON path, not "
                    f"{type(obj).__name__}")


def _format_for(path, format):
    if format is not None:
        if format not in FORMATS:
            raise ValueError(f"unknown picture format {format!r}: use one of {', '.join(FORMATS)}")
        return format
    suffix = os.path.splitext(os.fspath(path))[1].lstrip(".").lower() if path is not None else ""
    return suffix if suffix in FORMATS else "svg"


def _target(path, fmt):
    path = os.fspath(path)
    return path if os.path.splitext(path)[1] else f"{path}.{fmt}"


def _digraph(source, svg=None):
    import graphviz

    class RenderedDigraph(graphviz.Digraph):
        """A Digraph that shows the picture already laid out (within the budget) instead of laying it out again."""

        _gradviz_svg = None

        def _repr_image_svg_xml(self):
            return self._gradviz_svg if self._gradviz_svg is not None else super()._repr_image_svg_xml()

        def _repr_svg_(self):
            # IPython's older display hook and other front ends still ask for ``_repr_svg_``
            return self._repr_image_svg_xml()

    graph = RenderedDigraph()
    graph.body = source.split("\n", 1)[1].rsplit("}", 1)[0].splitlines(keepends=True)
    graph._gradviz_svg = svg
    return graph


def render(variable_or_trace, path=None, format=None, budget=4.0, **options):
    """Draw a graph of a trace: returns a ``graphviz.Digraph`` (shown inline in Jupyter).

    ``path``: also write the picture there (suffix added when missing). ``format``: svg, png, pdf or dot
    (default: from the path's suffix, else svg). ``budget``: seconds for layout before falling back to cheaper
    settings and then a collapsed view. Other options go to ``build_graph`` (iteration, depth, show_saved,
    show_grads, forward, max_nodes, graphs). Without Graphviz's ``dot`` program, the ``.dot`` source is still
    written and ``DotNotFoundError`` says in one line how to install it.
    """
    doc = as_document(variable_or_trace)
    fmt = _format_for(path, format)
    if fmt == "dot" or not dot_available():
        source = to_dot(build_graph(doc, **options))
        graph = _digraph(source)
        dot_path = None
        if path is not None:
            dot_path = _target(path, "dot") if fmt == "dot" else os.path.splitext(os.fspath(path))[0] + ".dot"
            with open(dot_path, "w", encoding="utf-8") as f:
                f.write(source)
        if fmt != "dot":
            raise DotNotFoundError(DOT_MISSING, digraph=graph, dot_path=dot_path)
        return graph
    _, source, data = lay_out(doc, fmt, budget, **options)
    svg = data.decode("utf-8") if fmt == "svg" else None
    if path is not None:
        with open(_target(path, fmt), "wb") as f:
            f.write(data)
    return _digraph(source, svg)


def notebook_html(doc, **options):
    """HTML for Jupyter (``Trace._repr_html_`` should return this): a summary line, the graph, the diagnostics."""
    from .html import notebook_fragment

    return notebook_fragment(as_document(doc), **options)
