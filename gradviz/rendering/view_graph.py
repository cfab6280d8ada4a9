"""A part view as graph data for the page to lay out itself (``assets/layout.js``), instead of dot's SVG: its
nodes, edges and clusters as the ``GraphSpec`` has them, in short lists. The page lays a view out when it is
first opened, so writing the report lays out only the top views (and ``gradviz run`` only its picture files).

Texts stay plain: the page puts them in with ``textContent``. Ids are the ones dot's SVG carries (``html_id``,
dot's ``edgeN`` in edge order), so search, deep links, highlighting and the inspector find the same elements.
"""

import json

# the order of each list, which assets/layout.js reads by position
NODE_FIELDS = ("id", "name", "kind", "shape", "style", "fill", "border", "penwidth", "peripheries", "fontsize",
               "rows", "tooltip", "cluster")
EDGE_FIELDS = ("tail", "head", "style", "color", "penwidth", "label", "constraint", "minlen", "arrowhead")
CLUSTER_FIELDS = ("name", "id", "parent", "rows", "style", "fill", "border")


def _rows(rows):
    """[[text, bold, size, colour]]: a label's lines (size and colour 0/"" when the node's own)."""
    return [[row.text, 1 if row.bold else 0, row.size or 0, row.color or ""] for row in rows]


def view_graph(spec):
    """The JSON-ready graph of ``spec`` (``GraphSpec``): heading, rank direction, nodes, edges, clusters."""
    clusters = {c.name for c in spec.clusters}
    return {
        "title": spec.title, "subtitle": list(spec.subtitle), "rankdir": spec.rankdir,
        "legend": [[e.glyph, e.border, e.label] for e in spec.legend],
        "nodes": [[n.html_id or n.name, n.name, n.kind, n.shape, n.style, n.fill, n.border, n.penwidth,
                   n.peripheries, n.fontsize, _rows(n.rows), n.tooltip, n.cluster if n.cluster in clusters else None]
                  for n in spec.nodes],
        "edges": [[e.tail, e.head, e.style, e.color, e.penwidth, e.label, 1 if e.constraint else 0, e.minlen,
                   e.arrowhead] for e in spec.edges],
        "clusters": [[c.name, c.html_id or c.name, c.parent if c.parent in clusters else None, _rows(c.rows),
                      c.style, c.fill, c.border] for c in spec.clusters],
    }


def view_graph_text(spec):
    """``view_graph(spec)`` as compact JSON (what is packed into the page)."""
    return json.dumps(view_graph(spec), separators=(",", ":"), ensure_ascii=False)
