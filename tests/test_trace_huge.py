"""One giant graph gives a bounded document (tracing/elide.py): its ends, roots and diagnostic points are kept,
the rest is counted; the document still loads, validates, renders and gives the same diagnostics."""

import json
import math

import numpy as np
import pytest

import gradviz
from gradviz.tracing import elide, load_trace


@pytest.fixture
def small_limit(monkeypatch):
    monkeypatch.setattr(elide, "GRAPH_NODE_LIMIT", 100)
    monkeypatch.setattr(elide, "ENDS", 30)
    monkeypatch.setattr(elide, "POINT_LIMIT", 5)


def _chain(n, poison_at=None):
    x = gradviz.ones(4, requires_grad=True)
    with gradviz.trace() as tr:
        y = x
        for i in range(n):
            y = y * (float("nan") if i == poison_at else 1.0000001)
        y.sum().backward()
    return tr.to_dict()


def test_a_giant_chain_keeps_its_ends_and_counts_the_rest(small_limit, tmp_path):
    doc = _chain(400)
    (graph,) = doc["graphs"]
    ops = [n for n in doc["nodes"] if n["op"] != "AccumulateGrad"]
    # 30 oldest + 30 newest ops (the sum is the newest, the root), and the leaf's accumulator
    assert len(ops) == 60 and len(doc["nodes"]) == 61
    assert graph["elided"] == {"nodes": 401 + 1 - 61}
    assert doc["dropped"]["elided_nodes"] == 341 and doc["dropped"]["elided_variables"] == 341
    assert "341 nodes of graphs above 100 nodes were elided" in doc["dropped"]["note"]
    kept = {n["id"] for n in doc["nodes"]}
    assert set(graph["nodes"]) == kept and graph["roots"] == [max(kept)]
    (b,) = doc["backwards"]
    assert set(b["visited"]) <= kept and b["elided_visits"] == 341
    assert {int(k) for k in b["grad_norms"]} <= kept
    assert all(v["node"] is None or v["node"] in kept for v in doc["variables"])
    path = tmp_path / "huge.json"
    path.write_text(json.dumps(doc, allow_nan=False))
    assert load_trace(path)["graphs"][0]["elided"]["nodes"] == 341  # validates, loads
    dot = gradviz.render(load_trace(path), format="dot")
    assert "MulBackward" in str(dot)


def test_the_nan_in_the_middle_of_a_giant_chain_is_kept_and_diagnosed_alike(small_limit, monkeypatch):
    doc = _chain(400, poison_at=200)
    monkeypatch.setattr(elide, "GRAPH_NODE_LIMIT", 10**9)
    full = _chain(400, poison_at=200)
    first = doc["first_nonfinite"]["node"]
    assert first in {n["id"] for n in doc["nodes"]}
    assert len(doc["nodes"]) < 200 and len(full["nodes"]) == 402
    found = [(d["code"], d["location"]["line"], d["nodes"]) for d in doc["diagnostics"]]
    assert found and found == [(d["code"], d["location"]["line"], d["nodes"]) for d in full["diagnostics"]]
    assert "nan-inf" in {code for code, _, _ in found}


def test_graphs_under_the_limit_are_untouched(small_limit):
    doc = _chain(90)
    assert "elided" not in doc["graphs"][0] and "elided_nodes" not in doc["dropped"]
    assert len(doc["nodes"]) == 92 and "elided_visits" not in doc["backwards"][0]


def test_norms_of_kept_nodes_are_unchanged(small_limit, monkeypatch):
    doc = _chain(300)
    monkeypatch.setattr(elide, "GRAPH_NODE_LIMIT", 10**9)
    full = _chain(300)
    norms, all_norms = doc["backwards"][0]["grad_norms"], full["backwards"][0]["grad_norms"]
    assert norms and all(math.isclose(v, all_norms[k]) for k, v in norms.items())
    assert np.isclose(len(all_norms) - len(norms), doc["backwards"][0]["elided_visits"])


def test_a_dead_giant_graph_lets_go_of_its_elided_records(small_limit):
    x = gradviz.ones(4, requires_grad=True)
    with gradviz.trace() as tr:
        y = x
        for _ in range(400):
            y = y * 1.0000001
        y.sum().backward()
        while_alive = len(tr.builder.nodes)
        del y  # the chain dies; it is counted under its structure when the next iteration begins
        for _ in range(3):
            (x * 2).sum().backward()
        after = len(tr.builder.nodes)
    assert while_alive == 402 and after < 70  # 61 kept of the chain, a few of the small graphs
    doc = tr.to_dict()
    chain = doc["graphs"][0]
    assert chain["elided"] == {"nodes": 341} and len(chain["nodes"]) == 61
    assert chain["roots"] == [max(n for n in chain["nodes"])]  # the sum, not a kept node whose consumer went
    assert doc["dropped"]["elided_nodes"] == 341 and doc["dropped"]["elided_variables"] == 341
    first = doc["backwards"][0]
    assert first["elided_visits"] == 341 and len(first["visited"]) == 61
    assert {int(k) for k in first["grad_norms"]} <= set(chain["nodes"])
    assert doc["structures"][0]["node_count"] == 401 and doc["structures"][0]["count"] == 1
    # the small graphs share the leaf's accumulator with the chain: it stays
    acc = next(n["id"] for n in doc["nodes"] if n["op"] == "AccumulateGrad")
    assert all(acc in g["nodes"] for g in doc["graphs"])
