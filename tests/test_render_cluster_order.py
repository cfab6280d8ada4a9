"""The same DOT gives the same SVG bytes: dot orders sibling clusters by where their names sit in its memory,
which changes with what it laid out before (a session, a batch of views); ``cluster_order`` puts them back in
the DOT's order."""

import re

import pytest

from gradviz.rendering import build_graph, dot_session, layout, to_dot
from gradviz.rendering.cluster_order import in_declared_order
from tests.synthetic_docs import DocBuilder

needs_dot = pytest.mark.skipif(not layout.dot_available(), reason="Graphviz dot is not installed")
_CLUSTER_ID = re.compile(rb'<g id="gv&#45;(cluster_\d+)" class="cluster">')


def blocks_doc(blocks=6, sub=3):
    """``blocks`` sibling modules ``net.b<i>``, each of ``sub`` sibling submodules holding two ops: many
    clusters side by side, nested two deep."""
    b = DocBuilder("blocks.py")
    b.module("net", "Net")
    y = b.leaf("x", (4,), requires_grad=False)
    for i in range(blocks):
        b.module(f"net.b{i}", "Block")
        for j in range(sub):
            path = ["net", f"net.b{i}", f"net.b{i}.s{j}"]
            b.module(path[-1], "Sub")
            y = b.op("MulBackward0", [y, b.leaf(f"{path[-1]}.w", (4,), parameter=True)], (4,), module=path)
            y = b.op("ReluBackward0", [y], (4,), module=path)
    b.backward(b.op("SumBackward0", [y], ()))
    return b.finish()


def source_of(doc):
    return to_dot(build_graph(doc, depth=3))


def declared(source):
    return [name.encode() for name in re.findall(r"(?m)^\s*subgraph (cluster_\d+) \{$", source)]


@needs_dot
def test_one_dot_laying_out_many_graphs_gives_each_the_bytes_of_a_fresh_dot_in_the_dots_cluster_order():
    source = source_of(blocks_doc())
    assert len(declared(source)) == 1 + 6 + 18                    # net, its blocks, their parts
    fresh = layout.run_dot(source, "svg", 30)
    others = "".join(source_of(blocks_doc(blocks, 2)) for blocks in (2, 3, 4, 5))
    seen = set()
    for _ in range(6):  # laid out after other graphs: alone in one dot run, and in a session
        several = layout.run_dot(others + source, "svg", 30)
        seen.add(b"<?xml" + several.split(b"<?xml")[-1])
        with dot_session.session():
            layout.run_dot(others, "svg", 30)
            seen.add(layout.run_dot(source, "svg", 30))
    unnamed = {re.sub(rb"%\d+|page\d+,\d+_", b"", svg) for svg in seen}
    assert unnamed == {re.sub(rb"%\d+|page\d+,\d+_", b"", fresh)}          # byte for byte, every time
    assert _CLUSTER_ID.findall(fresh) == declared(source)               # in the order the DOT declares them


def test_clusters_are_put_in_declared_order_with_their_comments_and_nothing_else_moves():
    source = ('digraph {\n\tsubgraph cluster_0 {\n\t\tgraph [id="gv-c0", label="a"]\n'
              '\t\tsubgraph cluster_1 {\n\t\t\tgraph [id="gv-c1", label="b"]\n\t\t\tn1\n\t\t}\n'
              '\t\tsubgraph cluster_2 {\n\t\t\tgraph [id="gv-\\"c2\\"", label="c"]\n\t\t\tn2\n\t\t}\n\t}\n}\n')

    def block(name, ident):
        return f'<!-- {name} -->\n<g id="{ident}" class="cluster">\n<path d="M0,0"/>\n</g>\n'.encode()

    head = b'<svg>\n<g id="graph0" class="graph">\n<polygon fill="white"/>\n'
    tail = b'<!-- n1 -->\n<g id="gv&#45;n1" class="node">\n<text>n1</text>\n</g>\n</g>\n</svg>\n'
    c0, c1, c2 = block("cluster_0", "gv&#45;c0"), block("cluster_1", "gv&#45;c1"), \
        block("cluster_2", "gv&#45;&quot;c2&quot;")
    assert in_declared_order(head + c0 + c2 + c1 + tail, source) == head + c0 + c1 + c2 + tail
    assert in_declared_order(head + c2 + c1 + c0 + tail, source) == head + c0 + c1 + c2 + tail
    # a cluster the DOT does not declare (not gradviz's DOT): left as dot wrote it
    stranger = block("cluster_9", "gv&#45;c9")
    assert in_declared_order(head + c2 + stranger + tail, source) == head + c2 + stranger + tail
