"""``GraphSpec`` → DOT text. Deterministic (names come from document ids, attributes in a fixed order) and
escaping every user string: labels are HTML-like with entity escaping, other strings fully escaped and quoted.
"""

import functools
import re

FONT = "Helvetica"
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_SAFE_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _clean(text):
    return _clean_text(str(text))


@functools.lru_cache(maxsize=1 << 16)  # a page writes the same op names and shapes thousands of times
def _clean_text(text):
    # Lone surrogates and control characters would break the file or Graphviz's HTML parser.
    text = text.encode("utf-8", "replace").decode("utf-8")
    return _CONTROL.sub("\ufffd", text.replace("\t", " ").replace("\r\n", "\n").replace("\r", "\n"))


def html_escape(text):
    """Text for inside an HTML-like label: entities for & < > " ', newlines as line breaks."""
    text = _clean(text)
    text = (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
            .replace("'", "&#39;").replace("]", "&#93;").replace("[", "&#91;"))
    return text.replace("\n", '<BR ALIGN="CENTER"/>')


def quote(text):
    """A DOT double-quoted string holding ``text`` literally (as an escString)."""
    text = _clean(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{text}"'


def dot_id(name):
    return name if _SAFE_ID.match(name) else quote(name)


def _row_html(row):
    text = html_escape(row.text) if row.text else " "
    if row.bold:
        text = f"<B>{text}</B>"
    attrs = ""
    if row.size:
        attrs += f' POINT-SIZE="{int(row.size)}"'
    if row.color:
        attrs += f" COLOR={quote(row.color)}"
    if attrs:
        text = f"<FONT{attrs}>{text}</FONT>"
    return f"<TR><TD>{text}</TD></TR>"


def rows_label(rows):
    body = "".join(_row_html(row) for row in rows)
    return f'<<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="0" CELLPADDING="1">{body}</TABLE>>'


def _graph_label(spec):
    rows = [f'<TR><TD ALIGN="LEFT"><B>{html_escape(spec.title)}</B></TD></TR>']
    rows += [f'<TR><TD ALIGN="LEFT"><FONT POINT-SIZE="9">{html_escape(note)}</FONT></TD></TR>'
             for note in spec.subtitle]
    # One cell of text per legend line: a nested table would be stretched to the title's width by Graphviz,
    # opening wide gaps between each swatch and its label.
    for start in range(0, len(spec.legend), 4):
        entries = "<FONT POINT-SIZE=\"9\">    </FONT>".join(
            f'<FONT POINT-SIZE="11" COLOR={quote(e.border)}>{html_escape(e.glyph)}</FONT>'
            f'<FONT POINT-SIZE="9"> {html_escape(e.label)}</FONT>' for e in spec.legend[start:start + 4])
        rows.append(f'<TR><TD ALIGN="LEFT">{entries}</TD></TR>')
    return f'<<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="2">{"".join(rows)}</TABLE>>'


def _attrs(pairs):
    return "[" + ", ".join([f"{key}={value}" for key, value in pairs]) + "]"


def _num(x):
    return f"{x:g}"


def _node_line(node):
    pairs = [("id", quote(node.html_id or node.name)), ("label", rows_label(node.rows)), ("shape", node.shape),
             ("style", quote(node.style)), ("fillcolor", quote(node.fill)), ("color", quote(node.border)),
             ("fontsize", str(node.fontsize))]
    if node.penwidth != 1:
        pairs.append(("penwidth", _num(node.penwidth)))
    if node.peripheries != 1:
        pairs.append(("peripheries", str(node.peripheries)))
    if node.kind in ("ghost", "saved", "note"):
        pairs += [("margin", quote("0.04,0.02")), ("height", "0.2")]
    if node.tooltip:
        pairs.append(("tooltip", quote(node.tooltip)))
    return f"{dot_id(node.name)} {_attrs(pairs)}"


def _edge_line(edge):
    pairs = []
    if edge.label:
        pairs.append(("label", quote(edge.label)))
    if edge.style != "solid":
        pairs.append(("style", edge.style))
    if edge.color != "#555555":
        pairs.append(("color", quote(edge.color)))
    if edge.penwidth != 1:
        pairs.append(("penwidth", _num(edge.penwidth)))
    if not edge.constraint:
        pairs.append(("constraint", "false"))
    if edge.minlen != 1:
        pairs.append(("minlen", str(edge.minlen)))
    if edge.arrowhead != "normal":
        pairs.append(("arrowhead", edge.arrowhead))
    line = f"{dot_id(edge.tail)} -> {dot_id(edge.head)}"
    return f"{line} {_attrs(pairs)}" if pairs else line


def _cluster_lines(spec, cluster, children, members, depth):
    pad = "\t" * depth
    lines = [f"{pad}subgraph {cluster.name} {{",
             f"{pad}\tgraph {_attrs([('id', quote(cluster.html_id or cluster.name)), ('label', rows_label(cluster.rows)), ('style', quote(cluster.style)), ('fillcolor', quote(cluster.fill)), ('color', quote(cluster.border)), ('labeljust', 'l')])}"]  # noqa: E501
    for child in children.get(cluster.name, []):
        lines += _cluster_lines(spec, child, children, members, depth + 1)
    lines += [f"{pad}\t{_node_line(node)}" for node in members.get(cluster.name, [])]
    lines.append(f"{pad}}}")
    return lines


def body_lines(spec):
    """The lines inside ``digraph { … }``, each ending in a newline (the ``graphviz`` package's body)."""
    graph_attrs = [("rankdir", spec.rankdir), ("fontname", quote(FONT))]
    if spec.title or spec.subtitle or spec.legend:  # (a picture without a heading: the page says it beside)
        graph_attrs += [("label", _graph_label(spec)), ("labelloc", "t"), ("labeljust", "l")]
    graph_attrs += [("nodesep", "0.25"), ("ranksep", "0.35")]
    graph_attrs += [(key, quote(value)) for key, value in sorted(spec.layout.items())]
    node_attrs = [("fontname", quote(FONT)), ("margin", quote("0.1,0.04"))]
    if spec.node_height is not None:
        node_attrs.append(("height", _num(spec.node_height)))
    lines = [f"graph {_attrs(graph_attrs)}",
             f"node {_attrs(node_attrs)}",
             f"edge {_attrs([('fontname', quote(FONT)), ('fontsize', '9'), ('arrowsize', '0.7')])}"]
    members, children, known = {}, {}, {c.name for c in spec.clusters}
    for node in spec.nodes:
        members.setdefault(node.cluster if node.cluster in known else None, []).append(node)
    for cluster in spec.clusters:
        children.setdefault(cluster.parent if cluster.parent in known else None, []).append(cluster)
    for cluster in children.get(None, []):
        lines += _cluster_lines(spec, cluster, children, members, 0)
    lines += [_node_line(node) for node in members.get(None, [])]
    lines += [_edge_line(edge) for edge in spec.edges]
    return [f"\t{line}\n" for line in lines]


def to_dot(spec):
    """The DOT source of a ``GraphSpec``: same spec, same text."""
    return "digraph {\n" + "".join(body_lines(spec)) + "}\n"
