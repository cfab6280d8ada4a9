"""Pictures and reports from trace documents (docs/trace-format.md) — never from live engine objects.

``render`` draws a document's graph with Graphviz (``gradviz.render``, in ``gradviz/viz.py``, also takes
Variables, traces and paths); ``build_graph``/``to_dot`` give the picture as data and as DOT text;
``report`` builds rich renderables; ``html`` writes the self-contained report page. Graphviz and rich load
only when used.
"""

import os
from collections.abc import Mapping

from ..document import check_format
from .dot import to_dot
from .graph import build_graph
from .layout import DOT_MISSING, DotNotFoundError, LayoutTimeout, dot_available, lay_out

FORMATS = ("svg", "png", "pdf", "dot")

__all__ = ["render", "build_graph", "to_dot", "dot_available", "notebook_html", "as_document", "FORMATS",
           "DotNotFoundError", "LayoutTimeout", "DOT_MISSING"]


def as_document(doc):
    """``doc`` itself when it is a trace document, or the document of an object that has ``to_dict()`` (a
    Trace). Rendering reads documents only: ``gradviz.render`` (``gradviz/viz.py``) turns Variables, saved
    files and other engines' tensors into one first."""
    if not isinstance(doc, Mapping) and callable(getattr(doc, "to_dict", None)):
        doc = doc.to_dict()
    if not isinstance(doc, Mapping):
        raise TypeError(f"rendering takes a trace document (a dict, see docs/trace-format.md), not "
                        f"{type(doc).__name__}; gradviz.render() also takes Variables, traces and paths")
    return check_format(doc)


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


def render(doc, path=None, format=None, budget=4.0, **options):
    """Draw the graph of trace document ``doc``: returns a ``graphviz.Digraph`` (shown inline in Jupyter).

    ``path``: also write the picture there (suffix added when missing). ``format``: svg, png, pdf or dot
    (default: from the path's suffix, else svg). ``budget``: seconds for layout before falling back to cheaper
    settings and then a collapsed view. Other options go to ``build_graph`` (iteration, depth, show_saved,
    show_grads, forward, max_nodes, graphs; ``rankdir`` "TB"/"LR"/"BT"/"RL", ``architecture=True`` for modules
    as boxes, ``node_budget`` for the node count that chooses the module depth when ``depth`` is not given: see
    ``gradviz.render`` for what each does, with examples). Without Graphviz's ``dot`` program, the ``.dot``
    source is still written and ``DotNotFoundError`` says in one line how to install it.
    """
    doc = as_document(doc)
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
