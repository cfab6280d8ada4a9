"""dot's SVG with its clusters in the order the DOT declares them, so the same DOT always gives the same bytes.

Graphviz 2.x keeps a graph's subgraphs sorted by id, and a named subgraph's id is the address of its name in
dot's memory. Laid out alone by a fresh ``dot``, a graph usually gets the same addresses each time; after other
graphs in the same process (a ``dot_session``, a page's views laid out in batches) they depend on what was
freed before, and on where the system placed the heap. The positions do not change, only the order in which
sibling clusters are written: the same view then differs between two runs, byte for byte. ``dot`` writes each
cluster's ``<g class="cluster">`` flat, a cluster before the clusters inside it, all of them before the nodes;
putting them in the DOT's order (``to_dot`` writes a cluster, then its insides, then its next sibling) keeps a
cluster before those inside it and makes the SVG the same whatever ``dot`` laid out before.
"""

import html
import re

_DECLARED = re.compile(r'subgraph [^\n{]*\{\n\s*graph \[id="((?:[^"\\]|\\.)*)"')  # as ``dot._cluster_lines``
# each element comes after a comment naming it: the comment goes with it
_CLUSTER = re.compile(rb'(?:<!-- [^\n]* -->\n)?<g id="([^"]*)" class="cluster">\n')
_AFTER = re.compile(rb'(?:<!-- [^\n]* -->\n)?<g id="[^"]*" class="(?:node|edge)">\n|</g>\n</svg>')
_GRAPH_START = re.compile(r"(?m)^(?=digraph \{$)")


def _declared(source):
    """{cluster id: its place in ``source``} of one graph's DOT text."""
    return {re.sub(r"\\(.)", r"\1", found): number for number, found in enumerate(_DECLARED.findall(source))}


def in_declared_order(svg, source):
    """One graph's ``svg`` (bytes, as ``dot -Tsvg`` wrote it from ``source``) with its cluster elements in the
    order ``source`` declares them. Unchanged when a cluster is not found in ``source`` (not DOT from ``to_dot``)."""
    firsts = [at for at in (svg.find(b' class="node">'), svg.find(b' class="edge">')) if at >= 0]
    limit = min(firsts) if firsts else len(svg)  # the clusters come first: only that part is read
    if svg.count(b' class="cluster">', 0, limit) < 2:
        return svg
    starts = list(_CLUSTER.finditer(svg, 0, limit))
    order = _declared(source)
    ids = [html.unescape(found.group(1).decode("utf-8", "replace")) for found in starts]
    if any(i not in order for i in ids):
        return svg
    after = _AFTER.search(svg, starts[-1].end())
    if after is None:
        return svg
    bounds = [found.start() for found in starts] + [after.start()]
    blocks = [svg[bounds[n]:bounds[n + 1]] for n in range(len(starts))]
    if any(block.count(b"<g ") != 1 for block in blocks):
        return svg  # something else between the clusters: left as dot wrote it
    ranked = sorted(zip(ids, blocks), key=lambda pair: order[pair[0]])
    return svg[:bounds[0]] + b"".join(block for _, block in ranked) + svg[bounds[-1]:]


def each_in_declared_order(svg, source):
    """``in_declared_order`` for every graph of a run of ``dot -Tsvg`` on several graphs (``source`` holding
    them in the same order)."""
    graphs = [part for part in _GRAPH_START.split(source) if part.strip()]
    parts = svg.split(b"<?xml")
    if len(parts) - 1 != len(graphs) or parts[0].strip():
        return svg if len(graphs) != 1 else in_declared_order(svg, source)
    return b"".join(b"<?xml" + in_declared_order(part, graph) for part, graph in zip(parts[1:], graphs))
