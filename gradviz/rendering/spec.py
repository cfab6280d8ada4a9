"""The picture as data: what ``build_graph`` returns and ``to_dot`` writes. No Graphviz here.

Every text in a spec is plain text as the user wrote it; escaping happens only when it is written out.
"""

from dataclasses import dataclass, field

# Colours by meaning: (fill, border). Severity colours are also the legend's.
COLORS = {
    "op": ("#f4f4f4", "#555555"),
    "custom": ("#efe3fb", "#7d3c98"),
    "parameter": ("#d9f2d9", "#2e7d32"),
    "input": ("#dde7f7", "#35589a"),
    "const": ("#ffffff", "#999999"),
    "module": ("#fff8dc", "#8a6d00"),
    "repeat": ("#eef7fa", "#2b7a93"),
    "more": ("#ffffff", "#888888"),
    "note": ("#fffbe6", "#b7950b"),
    "saved": ("#fafafa", "#888888"),
    "cut": ("#ffffff", "#b03a2e"),
    "error": ("#f9d6d5", "#c0392b"),
    "warning": ("#fdebd0", "#d68910"),
    "info": ("#d6eaf8", "#2874a6"),
    "retained": ("#ececec", "#7f7f7f"),
}


@dataclass
class Row:
    """One line of a label."""

    text: str
    bold: bool = False
    size: int | None = None
    color: str | None = None


@dataclass
class SpecNode:
    name: str                      # DOT node name, from document ids (``n12``, ``v3``…)
    rows: list                     # [Row]
    kind: str                      # op, leaf, const, module, repeat, more, note, saved, cut, ghost
    shape: str = "box"
    fill: str = "#ffffff"
    border: str = "#555555"
    style: str = "filled"
    penwidth: float = 1.0
    peripheries: int = 1
    fontsize: int = 11
    cluster: str | None = None
    html_id: str = ""              # the SVG element id the HTML report looks up
    tooltip: str = ""
    doc_node: int | None = None
    doc_variable: int | None = None
    doc_nodes: list = field(default_factory=list)      # every document node it stands for (folded, collapsed)
    doc_variables: list = field(default_factory=list)  # every Variable it stands for (a folded leaf: each step's)
    opens: dict = field(default_factory=dict)          # options of the view it opens (a fold: its boxes' depth)


@dataclass
class SpecEdge:
    tail: str
    head: str
    label: str = ""
    style: str = "solid"           # dashed: a cut (.data/detach); dotted: an annotation
    color: str = "#555555"
    penwidth: float = 1.0
    constraint: bool = True
    arrowhead: str = "normal"
    kind: str = "data"             # data, cut, loop, note, saved, ghost
    minlen: int = 1                # 0: may sit on its consumer's rank (a parameter beside the op using it)


@dataclass
class SpecCluster:
    name: str                      # ``cluster_…`` key
    rows: list
    parent: str | None = None
    fill: str = "#ffffff"
    border: str = "#999999"
    style: str = "rounded"
    html_id: str = ""


@dataclass
class LegendEntry:
    label: str
    fill: str
    border: str
    glyph: str = "■"               # drawn in the border colour before the label


@dataclass
class GraphSpec:
    title: str
    subtitle: list = field(default_factory=list)   # [str]: what was collapsed, dropped…
    nodes: list = field(default_factory=list)
    edges: list = field(default_factory=list)
    clusters: list = field(default_factory=list)
    legend: list = field(default_factory=list)
    rankdir: str = "BT"
    layout: dict = field(default_factory=dict)     # extra graph attributes (cheaper layout settings)
    caption: str = ""                              # said beside the picture, not in it (the page's overview)
    node_height: float | None = None               # inches: the least node height, below dot's 0.5 (compact)
    collapsed: bool = False
