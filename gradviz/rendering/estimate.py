"""How big ``dot`` will draw a picture, from its spec alone: ranks from the edges, node sizes from their text.

The overview (``overview.py``) has to choose a module depth and a direction whose picture reads at 10 px once
fitted to the page's stage. Laying out every depth both ways to find out cost ``dot`` more than the picture file
itself; this estimate chooses, and only the chosen picture is laid out. It follows what ``dot`` does closely
enough to choose (within about 10 % on the overviews of the test models): layers by longest path, a node as wide
as its longest line at Helvetica's average glyph width, at least Graphviz's 0.75 × 0.5 inch, clusters padding
what they hold.
"""

from collections import defaultdict

# Helvetica's mean advance width for identifiers and numbers, in ems (bold a little wider), as the SVG layouts'
# dot measures it (Graphviz's own Arial tables, ``dot_text.py``; Pango measured about a tenth wider)
CHAR_EM = 0.5
BOLD_EM = 0.58
MIN_WIDTH, MIN_HEIGHT = 54.0, 36.0  # dot's default node size, 0.75 × 0.5 inch, in points
MARGIN_X, MARGIN_Y = 7.2, 2.9  # the node margin dot.py sets, "0.1,0.04" inch
LINE_GAP = 2.0  # points between the lines of a label (the table's cell padding)
LINE_HEIGHT = 1.2  # a line of text is this many times its size high, as dot measures it with its own tables
CLUSTER_PAD = 8.0  # what a cluster adds on each side of what it holds
CLUSTER_LABEL = 20.0  # a cluster's label line
GRAPH_MARGIN = 8.0  # dot's pad around the drawing


def _inches(value, default):
    try:
        return float(value) * 72.0
    except (TypeError, ValueError):
        return default


def node_size(node, least_height=MIN_HEIGHT):
    """(width, height) in points of a node as ``dot`` draws it: its longest line, its lines stacked, at least
    ``least_height``."""
    width = height = 0.0
    for row in node.rows:
        size = row.size or node.fontsize
        width = max(width, len(row.text) * size * (BOLD_EM if row.bold else CHAR_EM))
        height += size * LINE_HEIGHT + LINE_GAP
    width, height = width + 2 * MARGIN_X, height + 2 * MARGIN_Y
    if node.shape in ("ellipse", "oval", "circle"):  # an ellipse around a box of text is about √2 wider
        width, height = width * 1.41, height * 1.41
    return max(width, MIN_WIDTH), max(height, least_height)


def ranks(spec):
    """{node name: rank} by longest path from the sources, along the edges that constrain the layout (an edge of
    ``minlen`` 0 keeps its ends on one rank)."""
    names = [node.name for node in spec.nodes]
    known = set(names)
    into, out_degree = defaultdict(list), defaultdict(int)
    for edge in spec.edges:
        if edge.constraint and edge.tail in known and edge.head in known and edge.tail != edge.head:
            into[edge.head].append((edge.tail, edge.minlen))
            out_degree[edge.tail] += 1
    rank, visiting = {}, set()

    def place(name):  # iterative longest path: a cycle (none in a DAG's picture) is cut where it closes
        stack = [(name, False)]
        while stack:
            current, done = stack.pop()
            if current in rank:
                continue
            if done:
                visiting.discard(current)
                rank[current] = max((rank.get(tail, 0) + minlen for tail, minlen in into[current]), default=0)
                continue
            visiting.add(current)
            stack.append((current, True))
            stack += [(tail, False) for tail, _ in into[current] if tail not in rank and tail not in visiting]

    for name in names:
        place(name)
    return rank


def _nesting(spec):
    """{node name: how many clusters hold it}."""
    parent = {cluster.name: cluster.parent for cluster in spec.clusters}
    out = {}
    for node in spec.nodes:
        depth, cluster = 0, node.cluster
        while cluster in parent and depth < 64:
            depth, cluster = depth + 1, parent[cluster]
        out[node.name] = depth
    return out


def heading_size(spec):
    """(width, height) of the graph's heading: its title, notes and legend lines; (0, 0) without one."""
    lines = [(spec.title, 14, BOLD_EM)] if spec.title else []
    lines += [(note, 9, CHAR_EM) for note in spec.subtitle]
    for start in range(0, len(spec.legend), 4):
        entries = spec.legend[start:start + 4]
        lines.append((" " * 6 * len(entries) + "".join(entry.label for entry in entries), 9, CHAR_EM))
    if not lines:
        return 0.0, 0.0
    return (max(len(text) * size * em for text, size, em in lines) + 8,
            sum(size + 6 for _, size, _ in lines))


def drawn_size(spec):
    """(width, height) in points of ``spec`` laid out by ``dot`` in its ``rankdir``: the estimate."""
    if not spec.nodes:
        return heading_size(spec)
    flip = spec.rankdir in ("LR", "RL")
    ranksep = _inches(spec.layout.get("ranksep"), 0.35 * 72)
    nodesep = _inches(spec.layout.get("nodesep"), 0.25 * 72)
    least = MIN_HEIGHT if spec.node_height is None else spec.node_height * 72.0
    where, nesting = ranks(spec), _nesting(spec)
    across, along = defaultdict(float), defaultdict(float)  # per rank: the row's breadth, the rank's depth
    crowd = defaultdict(int)
    deepest = 0
    for node in spec.nodes:
        width, height = node_size(node, least)
        breadth, depth = (height, width) if flip else (width, height)
        level = nesting.get(node.name, 0)
        deepest = max(deepest, level)
        rank = where.get(node.name, 0)
        across[rank] += breadth + 2 * CLUSTER_PAD * level
        along[rank] = max(along[rank], depth)
        crowd[rank] += 1
    breadth = max(across[r] + nodesep * (crowd[r] - 1) for r in across)
    length = sum(along.values()) + ranksep * (len(along) - 1) + deepest * (CLUSTER_LABEL + 2 * CLUSTER_PAD)
    width, height = (length, breadth) if flip else (breadth, length)
    head_width, head_height = heading_size(spec)
    return max(width, head_width) + 2 * GRAPH_MARGIN, height + head_height + 2 * GRAPH_MARGIN
