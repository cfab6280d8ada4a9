"""Retained-graph memory: what the trace reports must be what is really held (nbytes, and tracemalloc)."""

import gc
import tracemalloc

import numpy as np

import gradviz
import gradviz.nn as nn


def held_by_graphs(roots):
    """Independent count: walk the live graphs and add up the distinct memory blocks their saved tensors hold,
    leaving out the storage of leaves that require grad (parameters belong to the model)."""
    seen_nodes, blocks = set(), {}
    stack = [r.grad_fn for r in roots if r.grad_fn is not None]
    while stack:
        node = stack.pop()
        if id(node) in seen_nodes:
            continue
        seen_nodes.add(id(node))
        for s in node.saved:
            if not isinstance(s.data, np.ndarray):
                continue
            v = s.variable
            if v is not None:
                base = v._base if v._base is not None else v
                if base.is_leaf and base.requires_grad:
                    continue
            owner = s.data
            while isinstance(owner.base, np.ndarray):
                owner = owner.base
            blocks[id(owner)] = owner.nbytes
        stack.extend(child for child, _ in node.next_functions if child is not None)
    return sum(blocks.values())


def make_model():
    gradviz.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.Tanh(), nn.Linear(256, 1))


def test_retained_graphs_match_nbytes_and_tracemalloc():
    model = make_model()
    model(gradviz.randn(2, 64)).sum().backward()  # allocate every .grad before measuring
    kept = []
    tr = gradviz.trace()  # imports the tracer before measuring
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        with tr:
            for _ in range(4):
                loss = model(gradviz.randn(4096, 64)).pow(2).mean()
                loss.backward(retain_graph=True)
                kept.append(loss)  # the graphs stay alive: the seed's out-of-memory
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    memory = tr.memory
    reported = memory["final_retained_bytes"]
    assert reported == held_by_graphs(kept)
    assert reported > 4 * 2 * 4096 * 256 * 4  # at least two 4096x256 activations per iteration
    assert abs(grown - reported) / reported < 0.01, (grown, reported)
    series = [p["retained_bytes"] for p in memory["series"]]
    assert len(series) == 4 and series[0] < series[1] < series[2] < series[3] == reported
    assert series[1] - series[0] == series[3] - series[2]  # the same graph held again each iteration
    assert memory["peak_retained_bytes"] == reported
    assert [p["graphs_alive"] for p in memory["series"]] == [1, 2, 3, 4]


def test_a_clean_loop_frees_every_graph():
    model = make_model()
    opt = gradviz.optim.SGD(model.parameters(), lr=0.01)
    x = gradviz.randn(128, 64)
    with gradviz.trace() as tr:
        for _ in range(5):
            opt.zero_grad()
            loss = model(x).pow(2).mean()
            before_backward = tr.stats["retained_bytes"]
            loss.backward()
            opt.step()
    doc = tr.to_dict()
    memory = doc["memory"]
    assert [p["retained_bytes"] for p in memory["series"]] == [0] * 5
    assert memory["final_retained_bytes"] == 0
    assert memory["peak_retained_bytes"] == before_backward > 128 * 256 * 4
    graph = doc["graphs"][0]
    assert graph["saved_bytes"] == before_backward and graph["freed_by"] == 0 and graph["freed_at_iteration"] == 0
    assert all(g["freed_by"] == g["iteration"] for g in doc["graphs"])


def test_dropping_the_list_releases_the_memory_figure():
    model = make_model()
    with gradviz.trace() as tr:
        kept = [model(gradviz.randn(32, 64)).sum() for _ in range(3)]
        held = tr.stats["retained_bytes"]
        assert held == held_by_graphs(kept) > 0
        del kept
        gc.collect()
        assert tr.stats["retained_bytes"] == 0
    assert tr.memory["peak_retained_bytes"] == held


def test_a_saved_view_is_charged_to_the_array_it_views_once():
    x = gradviz.randn(10, 10, requires_grad=True)
    with gradviz.trace() as tr:
        h = x * 1  # 400 bytes, a non-leaf
        a = h[:5].exp()  # exp saves its output (200 bytes)
        b = h.t().sin()  # sin saves its input: a view of h (charged as h's 400 bytes)
        c = h.cos()  # cos saves h itself: the same block, not counted again
        total = a.sum() + b.sum() + c.sum()
        assert tr.stats["retained_bytes"] == 200 + 400
        total.backward()
        assert tr.stats["retained_bytes"] == 0
