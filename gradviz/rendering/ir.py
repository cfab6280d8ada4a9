"""The working graph ``build_graph`` reshapes (fold, collapse, ghost) before styling it into a ``GraphSpec``.

Edges always point the way data flows forward (producer → consumer); the backward picture only reverses
arrows when it is written.
"""

from dataclasses import dataclass, field


@dataclass
class Item:
    key: str                       # becomes the DOT node name
    kind: str                      # op, leaf, const, cut, module, repeat, more
    order: tuple                   # walk order (document ids), for deterministic output
    title: str
    lines: list = field(default_factory=list)
    shape: tuple | None = None     # output shape
    calls: list = field(default_factory=list)   # cluster path: module call keys, outermost first
    nodes: list = field(default_factory=list)   # document node ids it stands for
    variables: list = field(default_factory=list)
    flags: set = field(default_factory=set)     # root, custom, parameter, input, stale, ghost…
    params: int = 0                # parameter values inside (module boxes)


@dataclass
class Edge:
    src: str
    dst: str
    kind: str = "data"             # data, cut, loop
    label: str = ""
    count: int = 1


class IR:
    """Items by key plus forward edges; ``remap`` merges items and rebuilds edges."""

    def __init__(self):
        self.items = {}
        self.edges = []
        self.clusters = {}         # key -> (kind, label lines, parent-independent)
        self.notes = []            # what was collapsed or dropped, for the title
        self.unfolded_size = 0     # items before loops were folded (the subtitle's "N nodes > max_nodes")
        self.graph_ids = set()     # the graphs drawn: an input from one of them is outside this view, not earlier

    def add(self, item):
        self.items[item.key] = item
        return item

    def copy(self, leave_out=(), edges=True):
        """A copy to reshape while this one stays as it is (one working graph collapsed at several depths), without
        the items keyed in ``leave_out``; ``edges`` False: with no edges (the caller sets them)."""
        out = IR()
        out.items = {key: _copied(item) for key, item in self.items.items() if key not in leave_out}
        if edges:
            out.edges = [Edge(edge.src, edge.dst, edge.kind, edge.label, edge.count) for edge in self.edges]
        out.clusters, out.notes = dict(self.clusters), list(self.notes)
        out.unfolded_size, out.graph_ids = self.unfolded_size, set(self.graph_ids)
        return out

    def edge(self, src, dst, kind="data", label=""):
        self.edges.append(Edge(src, dst, kind, label))

    def size(self):
        return len([item for item in self.items.values() if "ghost" not in item.flags])

    def remap(self, mapping, loop_pairs=frozenset()):
        """Replace item keys by ``mapping[key]`` (absent → unchanged, None → dropped); merge parallel edges.

        ``loop_pairs``: (src, dst) pairs, after mapping, that close a folded loop and are kept as loop edges.
        """
        for key, target in mapping.items():
            if target != key:
                self.items.pop(key, None)
        merged = {}
        for edge in self.edges:
            src = mapping.get(edge.src, edge.src)
            dst = mapping.get(edge.dst, edge.dst)
            if src is None or dst is None or src not in self.items or dst not in self.items:
                continue
            kind = edge.kind
            if src == dst or (src, dst) in loop_pairs:
                if (src, dst) not in loop_pairs:
                    continue
                kind = "loop"
            found = merged.get((src, dst, kind))
            if found is None:
                merged[(src, dst, kind)] = Edge(src, dst, kind, edge.label, edge.count)
            else:
                found.count += edge.count
        self.edges = list(merged.values())

    def consumers(self):
        out = {key: [] for key in self.items}
        for edge in self.edges:
            out[edge.src].append(edge)
        return out

    def producers(self):
        into = {key: [] for key in self.items}
        for edge in self.edges:
            into[edge.dst].append(edge)
        return into


def _copied(item, new=object.__new__):
    """``item`` with lists and sets of its own (``dataclasses.replace`` costs ten times more: a page copies
    thousands; each field by name, not in a loop over names, is a third less again)."""
    out = new(Item)
    fields = item.__dict__.copy()
    fields["lines"], fields["calls"] = fields["lines"][:], fields["calls"][:]
    fields["nodes"], fields["variables"] = fields["nodes"][:], fields["variables"][:]
    fields["flags"] = fields["flags"].copy()
    out.__dict__ = fields
    return out
