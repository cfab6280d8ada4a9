"""The torch adapter reports the nodes one call builds inputs first, each once (torch_graph.new_nodes)."""

import pytest

torch = pytest.importorskip("torch")

import gradviz  # noqa: E402


def test_a_gru_call_reports_each_node_once():
    torch.manual_seed(0)
    gru = torch.nn.GRU(8, 16)
    x = torch.randn(2, 4, 8)
    out, last = gru(x)
    total = out.sum()
    # the nodes of the graph, untraced; each kept alive while counted: a node's Python object lives only while
    # referenced, and a new one for another node can take a dead one's id (torch <= 2.9 reuses them here)
    seen, kept, stack = set(), [], [total.grad_fn, last.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        kept.append(node)
        stack.extend(child for child, _ in node.next_functions)
    with gradviz.trace(engine="torch") as tr:
        out, last = gru(x)
        out = out.sum()
    doc = tr.to_dict()
    assert len(doc["nodes"]) == len(seen)
    assert not [n for n in doc["nodes"] if n.get("external")]  # none reported early, without its line
